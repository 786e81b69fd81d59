/* The kernel features the server probed and uses (server/net/probe.c
 * probes them once at start-up), and their one-line description. */
#ifndef HE_FEATURES_H
#define HE_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct he_features {
    bool single_issuer;    /* IORING_SETUP_SINGLE_ISSUER */
    bool defer_taskrun;    /* IORING_SETUP_DEFER_TASKRUN */
    bool coop_taskrun;     /* IORING_SETUP_COOP_TASKRUN */
    bool multishot_accept; /* IORING_ACCEPT_MULTISHOT */
    bool recv_multishot;   /* IORING_RECV_MULTISHOT */
    bool buf_ring;         /* IORING_REGISTER_PBUF_RING */
    bool fixed_files;      /* sparse registered file table + FILES_UPDATE */
    bool send_zc;          /* IORING_OP_SEND_ZC */
    bool zc_report_usage;  /* IORING_SEND_ZC_REPORT_USAGE (6.2): notifications say "copied" */
    bool openat2_beneath;  /* openat2(RESOLVE_BENEATH) */
    bool reuseport_cbpf;   /* SO_ATTACH_REUSEPORT_CBPF */
    bool ktls;             /* tls ULP available */
    bool min_timeout;      /* IORING_FEAT_MIN_TIMEOUT (6.12): a wait for a batch, bounded in time */
    int numa_nodes;        /* 0 when libnuma is unavailable */
    /* Pipes (the vmsplice path): the largest size F_SETPIPE_SZ gives
     * (fs.pipe-max-size), and the pages of pipes this user may hold before
     * the kernel cuts new ones to two pages (fs.pipe-user-pages-soft);
     * 0: no such bound (CAP_SYS_RESOURCE or CAP_SYS_ADMIN, or no limit). */
    unsigned pipe_max_bytes;
    unsigned long pipe_budget_pages;
} he_features_t;

/* "multishot_accept recv_multishot ..." for the log and /stats. */
void he_features_describe(const he_features_t *f, char *out, size_t cap);

#endif
