/* Kernel features probed once at start-up (server/net/probe.c). The type
 * is base: /stats, the log and every layer read it. */
#ifndef HE_BASE_FEATURES_H
#define HE_BASE_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

/* Linux 6.2 uapi; liburing 2.3's copy of io_uring.h predates them */
#define HE_SEND_ZC_REPORT_USAGE (1U << 3)
#define HE_NOTIF_USAGE_ZC_COPIED (1U << 31)

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
    int numa_nodes;        /* 0 when libnuma is unavailable */
} he_features_t;

/* Probes the kernel once at start-up. HE_DISABLE_FEATURES (comma list of
 * the field names above) forces fallbacks, so tests cover every path. */
void he_features_probe(he_features_t *f);
/* "multishot_accept recv_multishot ..." for the log and /stats. */
void he_features_describe(const he_features_t *f, char *out, size_t cap);

#endif
