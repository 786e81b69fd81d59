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
#include "server/control/control.h"
#include "server/base/log.h"

static void he_usage(FILE *out)
{
    fprintf(out, "usage: hlsedge [-c FILE] [-t] [-h] [-V]\n"
                 "  -c FILE  configuration file (YAML); built-in defaults when absent\n"
                 "  -t       check the configuration and exit (0 valid, 2 invalid)\n"
                 "  -V       print the version\n"
                 "signals: TERM/INT drain and exit, HUP reloads FILE, USR1 reopens log files\n");
}

/* What the configuration loader has to say that is not an error (an empty
 * file): at start-up, on -t and on every reload. */
static void he_main_conf_warn(void *arg, const char *msg)
{
    (void)arg;
    he_log_warn("%s", msg);
}

int main(int argc, char **argv)
{
    he_conf_t *conf;
    const char *file = NULL;
    char err[HE_CONF_ERR_MAX + 256];
    bool test_only = false;
    int opt;

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

    conf = malloc(sizeof(*conf));
    if (!conf) {
        fprintf(stderr, "hlsedge: out of memory\n");
        return 1;
    }
    he_conf_defaults(conf);
    he_conf_set_warn(he_main_conf_warn, NULL);
    if (file && he_conf_load(conf, file, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        free(conf);
        return 2;
    }
    if (test_only) {
        printf("hlsedge: configuration %s is valid\n", file ? file : "(built-in defaults)");
        free(conf);
        return 0;
    }
    he_log_level = conf->log_level;

    /* Each connection is a descriptor: take the hard limit, like nginx's
     * worker_rlimit_nofile, and say so when it is still too low. */
    {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
            }
            if (rl.rlim_cur < (rlim_t)conf->max_connections + 64)
                he_log_warn("open-file limit %llu is below limits.max_connections %u: raise "
                            "ulimit -n (LimitNOFILE= under systemd)",
                            (unsigned long long)rl.rlim_cur, conf->max_connections);
        }
    }
    /* sendfile(2) to a socket the peer closed raises SIGPIPE; MSG_NOSIGNAL
     * covers only send(). */
    signal(SIGPIPE, SIG_IGN);

    /* The control thread's loop runs here, on the main thread; it starts
     * the workers and returns the exit status after the drain. */
    return he_control_main(conf);
}
