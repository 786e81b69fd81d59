/* The access log record of a finished response (worker side). */
#ifndef HE_HTTP_ACCESS_H
#define HE_HTTP_ACCESS_H

#include <stdint.h>

struct he_worker;
struct he_conn;
/* Records the response c just finished (called from he_respond_finish). */
void he_alog_push(struct he_worker *w, const struct he_conn *c, uint64_t end_ns, uint64_t ttfb_us,
                  uint64_t total_us);

#endif
