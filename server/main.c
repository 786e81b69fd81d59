/* hlsedge: HLS video delivery edge server. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "conf/conf.h"
#include "server/log.h"
#include "server/server.h"

#define HE_VERSION "0.1.0"

static void he_usage(FILE *out)
{
    fprintf(out, "usage: hlsedge [-c FILE] [-t] [-h] [-V]\n"
                 "  -c FILE  configuration file (YAML); built-in defaults when absent\n"
                 "  -t       check the configuration and exit (0 valid, 2 invalid)\n"
                 "  -V       print the version\n");
}

int main(int argc, char **argv)
{
    static he_conf_t conf;
    static he_server_t server;
    const char *file = NULL;
    char err[HE_CONF_ERR_MAX + 256];
    char feat[512];
    bool test_only = false;
    sigset_t sigs;
    int opt, rc;

    while ((opt = getopt(argc, argv, "c:thV")) != -1) {
        switch (opt) {
        case 'c':
            file = optarg;
            break;
        case 't':
            test_only = true;
            break;
        case 'V':
            printf("hlsedge %s\n", HE_VERSION);
            return 0;
        case 'h':
            he_usage(stdout);
            return 0;
        default:
            he_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hlsedge: unexpected argument '%s'\n", argv[optind]);
        he_usage(stderr);
        return 2;
    }

    he_conf_defaults(&conf);
    if (file && he_conf_load(&conf, file, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (test_only) {
        printf("hlsedge: configuration %s is valid\n", file ? file : "(built-in defaults)");
        return 0;
    }
    he_log_level = conf.log_level;

    /* Each connection is a descriptor: take the hard limit, like nginx's
     * worker_rlimit_nofile, and say so when it is still too low. */
    {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
            }
            if (rl.rlim_cur < (rlim_t)conf.max_connections + 64)
                he_log_warn("open-file limit %llu is below limits.max_connections %u: raise "
                            "ulimit -n (LimitNOFILE= under systemd)",
                            (unsigned long long)rl.rlim_cur, conf.max_connections);
        }
    }

    /* Signals go to this thread only; workers never see them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    rc = he_server_init(&server, &conf, err, sizeof(err));
    if (rc < 0) {
        he_log_error("%s", err);
        he_server_free(&server);
        return 1;
    }
    he_features_describe(&server.features, feat, sizeof(feat));
    he_log_info("hlsedge %s: config %s, root %s, %u workers", HE_VERSION,
                conf.file[0] ? conf.file : "(built-in defaults)", conf.root, server.nworkers);
    he_log_info("kernel features: %s", feat);
    rc = he_server_start(&server, err, sizeof(err));
    if (rc < 0) {
        he_log_error("%s", err);
        he_server_drain(&server);
        he_server_wait(&server);
        he_server_free(&server);
        return 1;
    }
    for (unsigned i = 0; i < conf.nlisten; i++)
        he_log_info("listening on %s", conf.listen[i].text);

    for (;;) {
        int sig = sigwaitinfo(&sigs, NULL);
        if (sig == SIGTERM || sig == SIGINT) {
            he_log_info("%s: draining (up to %u ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                        conf.drain_timeout_ms);
            break;
        }
    }
    he_server_drain(&server);
    he_server_wait(&server);
    he_server_free(&server);
    he_log_info("stopped");
    return 0;
}
