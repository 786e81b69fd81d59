/* loadgen: the command line. Options are a table (name, kind, where the
 * value goes, range, help), so parsing, validation and --help are data. */
#include "loadgen/lg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum he_lg_opt_kind {
    HE_LG_OPT_UINT,
    HE_LG_OPT_U64,
    HE_LG_OPT_DBL,
    HE_LG_OPT_DUR,
    HE_LG_OPT_FLAG,
    HE_LG_OPT_STR,
    HE_LG_OPT_FN
} he_lg_opt_kind_t;

typedef int (*he_lg_opt_fn)(he_lg_config_t *cfg, const char *v, char *err, size_t errlen);

typedef struct he_lg_opt {
    const char *name;
    char short_name;
    he_lg_opt_kind_t kind;
    size_t off;
    double min, max;
    he_lg_opt_fn fn;
    const char *metavar;
    const char *help;
} he_lg_opt_t;

static int he_lg_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

int he_lg_parse_duration(const char *s, double *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+') return -EINVAL;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0)) return -EINVAL;
    if (*end == 0 || strcmp(end, "s") == 0)
        ;
    else if (strcmp(end, "ms") == 0)
        v /= 1000;
    else if (strcmp(end, "m") == 0)
        v *= 60;
    else if (strcmp(end, "h") == 0)
        v *= 3600;
    else
        return -EINVAL;
    if (v > 365.0 * 86400) return -EINVAL;
    *out = v;
    return 0;
}

int he_lg_parse_cpus(const char *s, int *cpus, unsigned cap)
{
    unsigned n = 0;
    const char *p = s;
    if (!*p) return -EINVAL;
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9') return -EINVAL;
        long a = strtol(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            p++;
            if (*p < '0' || *p > '9') return -EINVAL;
            b = strtol(p, &end, 10);
            p = end;
        }
        if (a < 0 || b < a || b >= 4096) return -EINVAL;
        for (long c = a; c <= b; c++) {
            if (n == cap) return -EINVAL;
            cpus[n++] = (int)c;
        }
        if (*p == ',')
            p++;
        else if (*p)
            return -EINVAL;
    }
    return (int)n;
}

static int he_lg_opt_mode(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "hls") == 0)
        cfg->mode = HE_LG_MODE_HLS;
    else if (strcmp(v, "urls") == 0)
        cfg->mode = HE_LG_MODE_URLS;
    else
        return he_lg_errf(err, errlen, "--mode: expected hls or urls, got '%s'", v);
    return 0;
}

static int he_lg_opt_pace(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "realtime") == 0)
        cfg->pace = HE_LG_PACE_REALTIME;
    else if (strcmp(v, "linerate") == 0)
        cfg->pace = HE_LG_PACE_LINERATE;
    else
        return he_lg_errf(err, errlen, "--pace: expected realtime or linerate, got '%s'", v);
    cfg->pace_set = true;
    return 0;
}

static int he_lg_opt_rendition(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    char *end;
    if (strcmp(v, "abr") == 0) {
        cfg->rend = HE_LG_REND_ABR;
        return 0;
    }
    if (strncmp(v, "fixed:", 6) == 0) {
        const char *p = v + 6;
        unsigned long i = strtoul(p, &end, 10);
        if (end == p || *end || *p == '-' || i >= HE_LG_MAX_RENDITIONS)
            return he_lg_errf(err, errlen, "--rendition fixed:IDX: IDX must be 0..%d, got '%s'",
                              HE_LG_MAX_RENDITIONS - 1, p);
        cfg->rend = HE_LG_REND_FIXED;
        cfg->rend_fixed = (unsigned)i;
        return 0;
    }
    if (strncmp(v, "mix:", 4) == 0) {
        const char *p = v + 4;
        unsigned n = 0;
        double total = 0;
        while (*p) {
            double w = strtod(p, &end);
            if (end == p || !(w >= 0) || w > 1e9 || n == HE_LG_MAX_RENDITIONS)
                return he_lg_errf(err, errlen,
                                  "--rendition mix:W0,W1,...: at most %d non-negative weights",
                                  HE_LG_MAX_RENDITIONS);
            cfg->rend_weights[n++] = w;
            total += w;
            p = end;
            if (*p == ',')
                p++;
            else if (*p)
                return he_lg_errf(err, errlen, "--rendition mix: bad weight list '%s'", v + 4);
        }
        if (n == 0 || !(total > 0))
            return he_lg_errf(err, errlen, "--rendition mix: needs a positive weight");
        cfg->rend = HE_LG_REND_MIX;
        cfg->nrend_weights = n;
        return 0;
    }
    return he_lg_errf(err, errlen,
                      "--rendition: expected fixed:IDX, mix:W0,W1,... or abr, got '%s'", v);
}

static int he_lg_opt_popularity(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    char *end;
    cfg->popularity_set = true; /* a bad value fails the whole parse */
    if (strcmp(v, "uniform") == 0) {
        cfg->zipf_s = 0;
        return 0;
    }
    if (strncmp(v, "zipf:", 5) == 0) {
        double s = strtod(v + 5, &end);
        if (end != v + 5 && !*end && s >= 0 && s <= 10) {
            cfg->zipf_s = s;
            return 0;
        }
    } else if (strcmp(v, "zipf") == 0) {
        cfg->zipf_s = 1.0;
        return 0;
    }
    return he_lg_errf(err, errlen,
                      "--popularity: expected uniform or zipf:S (0 <= S <= 10), got '%s'", v);
}

static int he_lg_opt_cpus(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    int n = he_lg_parse_cpus(v, cfg->cpus, HE_LG_MAX_CPUS);
    if (n <= 0)
        return he_lg_errf(err, errlen, "--cpus: expected a list like 1 or 0-3 or 1,3, got '%s'", v);
    cfg->ncpus = (unsigned)n;
    return 0;
}

static int he_lg_opt_sweep(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    if (he_lg_sweep_parse(v, &cfg->sweep_start, &cfg->sweep_end, &cfg->sweep_step) < 0)
        return he_lg_errf(err, errlen,
                          "--sweep: expected START:END:STEP with 0 < START <= END, got '%s'", v);
    cfg->sweep = true;
    return 0;
}

static int he_lg_opt_sla_on(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "total") == 0)
        cfg->sla_metric = HE_LG_SLA_TOTAL;
    else if (strcmp(v, "ttfb") == 0)
        cfg->sla_metric = HE_LG_SLA_TTFB;
    else
        return he_lg_errf(err, errlen, "--sla-on: expected total or ttfb, got '%s'", v);
    return 0;
}

static int he_lg_opt_live(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    cfg->live = 1;
    return 0;
}

static int he_lg_opt_vod(he_lg_config_t *cfg, const char *v, char *err, size_t errlen)
{
    cfg->live = 0;
    return 0;
}

#define OFF(f) offsetof(he_lg_config_t, f)
static const he_lg_opt_t he_lg_opts[] = {
    {"mode", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_mode, "hls|urls",
     "HLS viewers or a URL list (default: hls when every URL ends in .m3u8)"},
    {"viewers", 0, HE_LG_OPT_UINT, OFF(viewers), 1, 10000000, NULL, "N",
     "simulated viewers (hls mode, default 10)"},
    {"connections", 'c', HE_LG_OPT_UINT, OFF(connections), 1, 10000000, NULL, "N",
     "connections (urls mode, default 10)"},
    {"threads", 't', HE_LG_OPT_UINT, OFF(threads), 1, HE_LG_MAX_CPUS, NULL, "N",
     "threads, one io_uring each (default 1)"},
    {"cpus", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_cpus, "LIST",
     "pin thread i to the i-th CPU of LIST (e.g. 1 or 2-5 or 1,3)"},
    {"duration", 'd', HE_LG_OPT_DUR, OFF(duration_s), 0, 0, NULL, "DUR",
     "stop after DUR (10, 10s, 500ms, 2m; default 10s unless --requests)"},
    {"requests", 'n', HE_LG_OPT_U64, OFF(max_requests), 1, 1e15, NULL, "N",
     "stop after N requests in all"},
    {"pace", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_pace, "realtime|linerate",
     "hls: one segment per segment duration, or as fast as possible"},
    {"rendition", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_rendition, "POLICY",
     "fixed:IDX, mix:W0,W1,... or abr (default abr)"},
    {"popularity", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_popularity, "uniform|zipf:S",
     "how viewers (or requests) spread over the URLs; --mode urls without it: each "
     "connection walks the list in turn"},
    {"live", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_live, NULL,
     "treat media playlists as live (default: live unless #EXT-X-ENDLIST)"},
    {"vod", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_vod, NULL, "treat media playlists as VOD"},
    {"buffer", 0, HE_LG_OPT_DBL, OFF(buffer_s), 0.1, 3600, NULL, "SECS",
     "realtime player buffer (default 12)"},
    {"timeout", 0, HE_LG_OPT_DUR, OFF(timeout_s), 0, 0, NULL, "DUR",
     "a request without progress for DUR fails (default 10s)"},
    {"verify", 0, HE_LG_OPT_FLAG, OFF(verify), 0, 0, NULL, NULL,
     "read bodies and check each URL's checksum stays the same"},
    {"no-trunc", 0, HE_LG_OPT_FLAG, OFF(no_trunc), 0, 0, NULL, NULL,
     "read bodies into buffers instead of discarding them in the kernel"},
    {"http2", 0, HE_LG_OPT_FLAG, OFF(http2), 0, 0, NULL, NULL,
     "HTTP/2: h2c prior knowledge on http://, ALPN h2 on https://; each viewer's requests "
     "are streams of one connection"},
    {"insecure", 'k', HE_LG_OPT_FLAG, OFF(insecure), 0, 0, NULL, NULL,
     "https: do not verify the server's certificate"},
    {"json", 0, HE_LG_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "print the summary as JSON"},
    {"quiet", 'q', HE_LG_OPT_FLAG, OFF(quiet), 0, 0, NULL, NULL, "no live line"},
    {"sweep", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_sweep, "START:END:STEP",
     "run once per client count, report the best within --sla-ms"},
    {"sla-ms", 0, HE_LG_OPT_DBL, OFF(sla_ms), 0.001, 1e7, NULL, "MS", "p99 limit for --sweep"},
    {"sla-on", 0, HE_LG_OPT_FN, 0, 0, 0, he_lg_opt_sla_on, "total|ttfb",
     "--sweep's p99: whole response (default) or time to first byte"},
    {"seed", 0, HE_LG_OPT_U64, OFF(seed), 0, 1.8e19, NULL, "N", "random seed (default 1)"},
    {"url-file", 0, HE_LG_OPT_STR, OFF(url_file), 0, 0, NULL, "FILE",
     "read URLs, one a line, from FILE"},
    {"ramp", 0, HE_LG_OPT_DUR, OFF(ramp_s), 0, 0, NULL, "DUR",
     "clients join spread evenly over DUR (default: all at once)"},
    {"churn", 0, HE_LG_OPT_DUR, OFF(churn_s), 0, 0, NULL, "MEAN",
     "sessions last an exponential time of mean MEAN; a leaving client is replaced after "
     "an exponential gap of mean MEAN/N (N clients)"},
    {"llhls", 0, HE_LG_OPT_FLAG, OFF(llhls), 0, 0, NULL, NULL,
     "hls: LL-HLS viewers: blocking playlist reloads (_HLS_msn/_HLS_part, _HLS_skip), parts "
     "and preload hints (implies --pace realtime; --timeout default 30s)"},
};
#undef OFF

#define HE_LG_NOPTS (sizeof(he_lg_opts) / sizeof(he_lg_opts[0]))

void he_lg_args_usage(FILE *f)
{
    fprintf(f, "usage: hlsedge-loadgen [options] URL...\n"
               "  HLS players (master -> media playlist -> segments) or a URL list at scale.\n"
               "  URLs are http://host[:port]/path or https://...\n\noptions:\n");
    for (size_t i = 0; i < HE_LG_NOPTS; i++) {
        const he_lg_opt_t *o = &he_lg_opts[i];
        char left[64];
        if (o->short_name)
            snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name, o->name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        fprintf(f, "  %-34s %s\n", left, o->help);
    }
    fprintf(f, "  -h, --help                         this text\n\n"
               "exit status: 0 no errors, 1 errors happened, 2 bad usage\n");
}

static bool he_lg_opt_takes_value(const he_lg_opt_t *o)
{
    return o->kind != HE_LG_OPT_FLAG && !(o->kind == HE_LG_OPT_FN && !o->metavar);
}

static int he_lg_opt_apply(he_lg_config_t *cfg, const he_lg_opt_t *o, const char *v, char *err,
                           size_t errlen)
{
    char *base = (char *)cfg, *end;
    switch (o->kind) {
    case HE_LG_OPT_UINT:
    case HE_LG_OPT_U64: {
        if (!*v || *v < '0' || *v > '9') goto bad_int;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || (double)x < o->min || (double)x > o->max) goto bad_int;
        if (o->kind == HE_LG_OPT_UINT)
            *(unsigned *)(base + o->off) = (unsigned)x;
        else
            *(uint64_t *)(base + o->off) = x;
        return 0;
    bad_int:
        return he_lg_errf(err, errlen, "--%s: expected an integer in %.0f..%.0f, got '%s'", o->name,
                          o->min, o->max, v);
    }
    case HE_LG_OPT_DBL: {
        double x = strtod(v, &end);
        if (end == v || *end || !(x >= o->min && x <= o->max))
            return he_lg_errf(err, errlen, "--%s: expected a number in %g..%g, got '%s'", o->name,
                              o->min, o->max, v);
        *(double *)(base + o->off) = x;
        return 0;
    }
    case HE_LG_OPT_DUR:
        if (he_lg_parse_duration(v, (double *)(base + o->off)) < 0)
            return he_lg_errf(err, errlen,
                              "--%s: expected a duration like 10, 10s, 500ms or 2m, got '%s'",
                              o->name, v);
        return 0;
    case HE_LG_OPT_FLAG:
        *(bool *)(base + o->off) = true;
        return 0;
    case HE_LG_OPT_STR: {
        char **slot = (char **)(base + o->off);
        free(*slot);
        *slot = strdup(v);
        return *slot ? 0 : -ENOMEM;
    }
    case HE_LG_OPT_FN:
        return o->fn(cfg, v, err, errlen);
    }
    return -EINVAL;
}

static int he_lg_add_url(he_lg_config_t *cfg, const char *u)
{
    char **n = realloc(cfg->urls, (cfg->nurls + 1) * sizeof(*n));
    if (!n) return -ENOMEM;
    cfg->urls = n;
    if (!(cfg->urls[cfg->nurls] = strdup(u))) return -ENOMEM;
    cfg->nurls++;
    return 0;
}

static int he_lg_read_url_file(he_lg_config_t *cfg, char *err, size_t errlen)
{
    FILE *f = fopen(cfg->url_file, "r");
    char line[HE_LG_URL_MAX + 2];
    if (!f)
        return he_lg_errf(err, errlen, "--url-file: cannot open '%s': %s", cfg->url_file,
                          strerror(errno));
    unsigned lineno = 0;
    int rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
            line[--n] = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#') continue;
        if ((rc = he_lg_add_url(cfg, s)) < 0) break;
    }
    fclose(f);
    return rc;
}

static bool he_lg_is_m3u8(const char *url)
{
    size_t n = strcspn(url, "?#");
    return n >= 5 && strncmp(url + n - 5, ".m3u8", 5) == 0;
}

static int he_lg_args_check(he_lg_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->url_file) {
        int rc = he_lg_read_url_file(cfg, err, errlen);
        if (rc < 0) return rc;
    }
    if (cfg->nurls == 0) return he_lg_errf(err, errlen, "no URL given");
    bool all_m3u8 = true;
    for (size_t i = 0; i < cfg->nurls; i++) {
        he_lg_url_t *u = malloc(sizeof(*u));
        if (!u) return -ENOMEM;
        int rc = he_lg_url_parse(cfg->urls[i], u);
        free(u);
        if (rc < 0)
            return he_lg_errf(err, errlen,
                              "bad URL '%s': expected http://host[:port]/path or https://...",
                              cfg->urls[i]);
        if (!he_lg_is_m3u8(cfg->urls[i])) all_m3u8 = false;
    }
    if (cfg->mode == HE_LG_MODE_AUTO) cfg->mode = all_m3u8 ? HE_LG_MODE_HLS : HE_LG_MODE_URLS;
    if (!cfg->pace_set) cfg->pace = HE_LG_PACE_REALTIME;
    if (cfg->sweep && !(cfg->sla_ms > 0)) return he_lg_errf(err, errlen, "--sweep needs --sla-ms");
    if (cfg->duration_s == 0 && cfg->max_requests == 0) cfg->duration_s = 10;
    if (cfg->sweep && cfg->duration_s == 0)
        return he_lg_errf(err, errlen, "--sweep needs --duration for each step");
    if (cfg->llhls) {
        if (cfg->mode != HE_LG_MODE_HLS) return he_lg_errf(err, errlen, "--llhls needs hls mode");
        if (cfg->pace_set && cfg->pace != HE_LG_PACE_REALTIME)
            return he_lg_errf(err, errlen, "--llhls plays in real time: no --pace linerate");
    }
    /* a blocking reload may be held for three target durations */
    if (cfg->timeout_s <= 0) cfg->timeout_s = cfg->llhls ? 30 : 10;
    if (cfg->churn_s > 0 && cfg->churn_s < 0.01)
        return he_lg_errf(err, errlen, "--churn: a mean session of at least 10ms");
    return 0;
}

int he_lg_args_parse(int argc, char **argv, he_lg_config_t *cfg, char *err, size_t errlen,
                     FILE *out)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->viewers = 10;
    cfg->connections = 10;
    cfg->threads = 1;
    cfg->live = -1;
    cfg->buffer_s = 12;
    cfg->timeout_s = 0; /* args_check: 10 s, 30 s with --llhls */
    cfg->seed = 1;
    err[0] = 0;

    bool only_urls = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_urls || a[0] != '-' || a[1] == 0) {
            if (he_lg_add_url(cfg, a) < 0) return -ENOMEM;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_urls = true;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            he_lg_args_usage(out);
            return 1;
        }
        const he_lg_opt_t *o = NULL;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
            for (size_t k = 0; k < HE_LG_NOPTS; k++)
                if (strlen(he_lg_opts[k].name) == nlen &&
                    strncmp(he_lg_opts[k].name, name, nlen) == 0)
                    o = &he_lg_opts[k];
            if (!o) return he_lg_errf(err, errlen, "unknown option '%s'", a);
            if (eq) {
                if (!he_lg_opt_takes_value(o))
                    return he_lg_errf(err, errlen, "--%s takes no value", o->name);
                val = eq + 1;
            }
        } else {
            for (size_t k = 0; k < HE_LG_NOPTS; k++)
                if (he_lg_opts[k].short_name == a[1]) o = &he_lg_opts[k];
            if (!o) return he_lg_errf(err, errlen, "unknown option '%s'", a);
            if (a[2]) {
                if (!he_lg_opt_takes_value(o))
                    return he_lg_errf(err, errlen, "unknown option '%s'", a);
                val = a + 2;
            }
        }
        if (he_lg_opt_takes_value(o) && !val) {
            if (i + 1 >= argc)
                return he_lg_errf(err, errlen, "--%s needs a value (%s)", o->name, o->metavar);
            val = argv[++i];
        }
        int rc = he_lg_opt_apply(cfg, o, val ? val : "", err, errlen);
        if (rc < 0) return rc;
    }
    return he_lg_args_check(cfg, err, errlen);
}

void he_lg_args_free(he_lg_config_t *cfg)
{
    for (size_t i = 0; i < cfg->nurls; i++)
        free(cfg->urls[i]);
    free(cfg->urls);
    free(cfg->url_file);
    cfg->urls = NULL;
    cfg->nurls = 0;
    cfg->url_file = NULL;
}
