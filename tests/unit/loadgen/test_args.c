/* loadgen/args.c: options, defaults and clear errors. */
#include "he_test.h"
#include <unistd.h>
#include "loadgen/args.c"
#include "loadgen/sweep.c"
#include "loadgen/url.c"

static int parse(he_lg_config_t *cfg, char *err, const char *a0, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    argv[argc++] = "hlsedge-loadgen";
    va_start(ap, a0);
    for (const char *a = a0; a; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    FILE *devnull = fopen("/dev/null", "w");
    int rc = he_lg_args_parse(argc, argv, cfg, err, 256, devnull);
    fclose(devnull);
    return rc;
}

#define BAD(msg_part, ...)                                                                         \
    do {                                                                                           \
        HE_CHECK_INT(parse(&cfg, err, __VA_ARGS__, NULL), -EINVAL);                                \
        if (!strstr(err, msg_part)) fprintf(stderr, "error '%s' lacks '%s'\n", err, msg_part);     \
        HE_CHECK(strstr(err, msg_part) != NULL);                                                   \
        he_lg_args_free(&cfg);                                                                     \
    } while (0)

int main(void)
{
    he_lg_config_t cfg;
    char err[256];
    const char *m = "http://127.0.0.1:8080/master.m3u8";
    const char *ts = "http://127.0.0.1:8080/a.ts";

    /* defaults */
    HE_CHECK_INT(parse(&cfg, err, m, NULL), 0);
    HE_CHECK_INT(cfg.mode, HE_LG_MODE_HLS);
    HE_CHECK_INT(cfg.viewers, 10);
    HE_CHECK_INT(cfg.threads, 1);
    HE_CHECK(cfg.duration_s == 10); /* bounded even when nothing is said */
    HE_CHECK_INT(cfg.pace, HE_LG_PACE_REALTIME);
    HE_CHECK_INT(cfg.rend, HE_LG_REND_ABR);
    HE_CHECK_INT(cfg.live, -1);
    he_lg_args_free(&cfg);

    /* a URL that is not a playlist makes it urls mode */
    HE_CHECK_INT(parse(&cfg, err, m, ts, NULL), 0);
    HE_CHECK_INT(cfg.mode, HE_LG_MODE_URLS);
    HE_CHECK_INT(cfg.nurls, 2);
    HE_CHECK(!cfg.popularity_set); /* each connection walks the list in turn */
    he_lg_args_free(&cfg);
    HE_CHECK_INT(parse(&cfg, err, "--popularity", "uniform", ts, NULL), 0);
    HE_CHECK(cfg.popularity_set && cfg.zipf_s == 0); /* each request drawn */
    he_lg_args_free(&cfg);

    HE_CHECK_INT(parse(&cfg, err, "--viewers", "5000", "-t", "2", "--cpus", "1,3-4", "-d", "500ms",
                       "-n", "1000", "--pace=linerate", "--rendition", "mix:1,2.5,0",
                       "--popularity", "zipf:1.2", "--live", "--buffer", "30", "--verify", "--json",
                       "-q", "-k", "--timeout", "2s", "--seed", "7", m, NULL),
                 0);
    HE_CHECK_INT(cfg.viewers, 5000);
    HE_CHECK_INT(cfg.threads, 2);
    HE_CHECK_INT(cfg.ncpus, 3);
    HE_CHECK_INT(cfg.cpus[0], 1);
    HE_CHECK_INT(cfg.cpus[2], 4);
    HE_CHECK(cfg.duration_s == 0.5);
    HE_CHECK_INT(cfg.max_requests, 1000);
    HE_CHECK_INT(cfg.pace, HE_LG_PACE_LINERATE);
    HE_CHECK_INT(cfg.rend, HE_LG_REND_MIX);
    HE_CHECK_INT(cfg.nrend_weights, 3);
    HE_CHECK(cfg.rend_weights[1] == 2.5);
    HE_CHECK(cfg.zipf_s == 1.2 && cfg.popularity_set);
    HE_CHECK_INT(cfg.live, 1);
    HE_CHECK(cfg.buffer_s == 30);
    HE_CHECK(cfg.verify && cfg.json && cfg.quiet && cfg.insecure);
    HE_CHECK(cfg.timeout_s == 2);
    HE_CHECK_INT(cfg.seed, 7);
    he_lg_args_free(&cfg);

    /* --requests alone: no time bound */
    HE_CHECK_INT(parse(&cfg, err, "-n", "5", "--rendition", "fixed:3", "--mode", "urls", m, NULL),
                 0);
    HE_CHECK(cfg.duration_s == 0);
    HE_CHECK_INT(cfg.rend_fixed, 3);
    HE_CHECK_INT(cfg.mode, HE_LG_MODE_URLS);
    he_lg_args_free(&cfg);

    HE_CHECK_INT(parse(&cfg, err, "--sweep", "100:500:100", "--sla-ms", "10", "-d", "1", ts, NULL),
                 0);
    HE_CHECK(cfg.sweep);
    HE_CHECK_INT(cfg.sweep_end, 500);
    he_lg_args_free(&cfg);

    HE_CHECK_INT(parse(&cfg, err, "--help", NULL), 1);
    he_lg_args_free(&cfg);

    BAD("no URL", "--viewers", "3");
    BAD("unknown option '--bogus'", "--bogus", m);
    BAD("--viewers: expected an integer", "--viewers", "abc", m);
    BAD("--viewers: expected an integer", "--viewers", "0", m);
    BAD("--viewers: expected an integer", "--viewers", "-5", m);
    BAD("--viewers needs a value", m, "--viewers");
    BAD("--duration: expected a duration", "-d", "10x", m);
    BAD("--pace: expected realtime or linerate", "--pace", "fast", m);
    BAD("--rendition: expected", "--rendition", "best", m);
    BAD("fixed:IDX", "--rendition", "fixed:99", m);
    BAD("--rendition mix", "--rendition", "mix:0,0", m);
    BAD("--popularity", "--popularity", "zipf:-1", m);
    BAD("--cpus", "--cpus", "3-1", m);
    BAD("--sweep: expected START:END:STEP", "--sweep", "5:1", m);
    BAD("--sweep needs --sla-ms", "--sweep", "1:5:1", m);
    BAD("bad URL 'ftp://x/y'", "ftp://x/y");
    BAD("bad URL", "127.0.0.1:8080/x.ts");
    BAD("--json takes no value", "--json=1", m);
    BAD("--url-file: cannot open", "--url-file", "/nonexistent/urls.txt");

    /* --url-file */
    char path[] = "/tmp/he_lg_test_urls_XXXXXX";
    int fd = mkstemp(path);
    HE_CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# comment\n\n  %s\r\n%s\n", ts, ts);
    fclose(f);
    HE_CHECK_INT(parse(&cfg, err, "--url-file", path, NULL), 0);
    HE_CHECK_INT(cfg.nurls, 2);
    HE_CHECK_STR(cfg.urls[0], ts);
    he_lg_args_free(&cfg);
    unlink(path);

    /* durations and CPU lists */
    double d;
    HE_CHECK_INT(he_lg_parse_duration("2m", &d), 0);
    HE_CHECK(d == 120);
    HE_CHECK_INT(he_lg_parse_duration("1.5h", &d), 0);
    HE_CHECK(d == 5400);
    HE_CHECK_INT(he_lg_parse_duration("", &d), -EINVAL);
    HE_CHECK_INT(he_lg_parse_duration("-1", &d), -EINVAL);
    int cpus[4];
    HE_CHECK_INT(he_lg_parse_cpus("0-3", cpus, 4), 4);
    HE_CHECK_INT(he_lg_parse_cpus("0-4", cpus, 4), -EINVAL);
    HE_CHECK_INT(he_lg_parse_cpus("1,,2", cpus, 4), -EINVAL);
    HE_TEST_MAIN_END();
}
