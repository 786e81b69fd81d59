/* Via (RFC 9110 7.6.3): the name this box gives itself towards its
 * parents, "hlsedge-<hostname>", and the loop check on what arrives. A
 * request whose Via already names this box went round a loop of parents
 * (an edge that is its own shield's origin, say): it is refused with 508
 * before it can make another round. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/handler/handler.h"

static char he_via_name[96];
static pthread_once_t he_via_once = PTHREAD_ONCE_INIT;

static void he_via_init(void)
{
    char host[64] = "";
    size_t n;
    if (gethostname(host, sizeof(host) - 1) < 0 || !host[0]) snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = 0;
    /* a received-by is a token: anything else in a host name becomes '-' */
    for (char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '-';
    n = (size_t)snprintf(he_via_name, sizeof(he_via_name), "hlsedge-%s", host);
    (void)n;
}

const char *he__via_name(void)
{
    pthread_once(&he_via_once, he_via_init);
    return he_via_name;
}

static bool he_via_sp(char c)
{
    return c == ' ' || c == '\t';
}

bool he__via_loop(const char *via, size_t len)
{
    const char *me = he__via_name(), *p = via, *end = via + len;
    size_t ml = strlen(me);
    while (p < end) {
        const char *e = memchr(p, ',', (size_t)(end - p)), *rb, *rbe;
        if (!e) e = end;
        /* [ protocol-name "/" ] protocol-version RWS received-by [ RWS comment ] */
        while (p < e && he_via_sp(*p))
            p++;
        while (p < e && !he_via_sp(*p))
            p++;
        while (p < e && he_via_sp(*p))
            p++;
        rb = p;
        while (p < e && !he_via_sp(*p))
            p++;
        rbe = p;
        if ((size_t)(rbe - rb) == ml && strncasecmp(rb, me, ml) == 0) return true;
        p = e + 1;
    }
    return false;
}
