/* Fuzz target for server/handler/via.c: the loop check reads any Via a
 * client or a parent sends. Whatever the bytes, it must not read past
 * them, and it must find this box's own name when the input carries it as
 * a received-by (the input is used twice: as it is, and with
 * "1.1 <our name>" appended as one more entry). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/handler/handler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *me = he__via_name();
    size_t ml = strlen(me), n;
    char *buf;

    if (size > 4096) return 0;
    /* an exact-size copy: ASan sees any read past the end */
    buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    (void)he__via_loop(buf, size);
    free(buf);

    n = size + 2 + 4 + ml;
    buf = malloc(n);
    if (!buf) return 0;
    memcpy(buf, data, size);
    memcpy(buf + size, ", 1.1 ", 6);
    memcpy(buf + size + 6, me, ml);
    if (!he__via_loop(buf, n)) abort(); /* our own name as the last received-by */
    free(buf);
    return 0;
}
