/* The one-line description of the probed kernel features. */
#include "server/base/features.h"

#include <stdio.h>

void he_features_describe(const he_features_t *f, char *out, size_t cap)
{
    snprintf(out, cap,
             "single_issuer=%d defer_taskrun=%d coop_taskrun=%d multishot_accept=%d "
             "recv_multishot=%d buf_ring=%d fixed_files=%d send_zc=%d zc_report_usage=%d "
             "min_timeout=%d openat2_beneath=%d "
             "reuseport_cbpf=%d ktls=%d numa_nodes=%d pipe_max=%u pipe_budget_pages=%lu",
             f->single_issuer, f->defer_taskrun, f->coop_taskrun, f->multishot_accept,
             f->recv_multishot, f->buf_ring, f->fixed_files, f->send_zc, f->zc_report_usage,
             f->min_timeout, f->openat2_beneath, f->reuseport_cbpf, f->ktls, f->numa_nodes,
             f->pipe_max_bytes, f->pipe_budget_pages);
}
