/* conf internals shared by conf.c (API), keys.c (the key table and its
 * setters), value.c (scalar parsers) and yaml.c (the libyaml walk). */
#ifndef HE_CONF_INTERNAL_H
#define HE_CONF_INTERNAL_H

#include "conf/conf.h"

/* What a key's value is; picks the setter and the "expected ..." text. */
typedef enum he__conf_type {
    HE__CONF_SECTION = 0, /* a mapping of further keys, "limits" */
    HE__CONF_UINT,        /* unsigned, min..max */
    HE__CONF_BOOL,        /* true/false, yes/no, on/off */
    HE__CONF_STR,         /* char[size] */
    HE__CONF_DURATION,    /* unsigned milliseconds, min..max */
    HE__CONF_ENUM,        /* one of names[], stored as an unsigned-sized enum */
    HE__CONF_WORKERS,     /* 1..max or "auto" (0) */
    HE__CONF_LISTEN,      /* one address or a list of them */
    HE__CONF_ADDR,        /* one address; "" or "off" = port 0 */
    HE__CONF_CPUS,        /* "auto" or a list of CPU numbers */
    HE__CONF_TYPE_COUNT
} he__conf_type_t;

#define HE__CONF_F_NONEMPTY 1u /* strings: "" is not a valid value */
#define HE__CONF_F_HEADER 2u   /* strings: sent as a header value, so no control bytes */

/* Upper bound on the table size, for the per-load "seen" arrays. */
#define HE__CONF_MAX_KEYS 64

typedef struct he__conf_key {
    const char *name; /* dotted path: "workers", "limits.header_bytes" */
    he__conf_type_t type;
    unsigned flags;           /* HE__CONF_F_* */
    size_t off;               /* offset of the field in he_conf_t */
    size_t size;              /* strings: size of the char array */
    unsigned min, max;        /* integers and durations (ms) */
    const char *const *names; /* enums: names indexed by value, NULL-terminated */
    const char *def;          /* default, spelled as in YAML; NULL for sections */
    const char *doc;          /* one line for humans */
} he__conf_key_t;

extern const he__conf_key_t he__conf_keys[];
extern const size_t he__conf_nkeys;
extern const char *const he__conf_log_level_names[];

/* Sets key k from one scalar v (NUL-terminated, len bytes; may hold NULs
 * when YAML escaped them). idx is -1 for a lone scalar, else the position in
 * a list (0 starts the list). Returns 0 or a negative errno; on error, why
 * may hold the text after "key: " (left empty, the caller says what the
 * key expects). */
int he__conf_set(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                 char *why, size_t whylen);
/* Whether k accepts a YAML sequence. */
int he__conf_takes_list(const he__conf_key_t *k);
/* "an integer in 1..1024", "true or false", ...: what k accepts. */
void he__conf_expect(const he__conf_key_t *k, char *buf, size_t len);
/* Index of the key named by section (-1 = top level) and leaf, or -1. */
int he__conf_find(int section, const char *leaf, size_t len);
/* Whether key i sits directly in section (-1 = top level). */
int he__conf_in_section(size_t i, int section);
/* Checks rules that span keys (uri_bytes <= header_bytes). seen[i] says
 * whether key i came from the file; on failure *bad is the key to blame and
 * why the text after "key: ". */
int he__conf_check(const he_conf_t *c, const unsigned char *seen, int *bad, char *why,
                   size_t whylen);

/* name as messages show it: long paths keep their last HE__CONF_NAME_MAX
 * bytes behind "...", so the line:col and the reason still fit in the
 * caller's HE_CONF_ERR_MAX. buf holds at least HE__CONF_NAME_MAX + 4. */
#define HE__CONF_NAME_MAX 200
const char *he__conf_msg_name(const char *name, char *buf, size_t len);

/* Walks the YAML in buf onto c (already holding defaults), then runs the
 * cross-key checks. Messages are prefixed with name. */
int he__conf_yaml_load(he_conf_t *c, const char *name, const char *buf, size_t len, char *err,
                       size_t errlen);

/* Scalars. Decimal digits only: no sign, fraction or exponent. -EINVAL or
 * -ERANGE (more than UINT_MAX). */
int he__conf_parse_uint(const char *s, size_t len, unsigned *out);
/* true/false, yes/no, on/off in any case. 0 or -EINVAL. */
int he__conf_parse_bool(const char *s, bool *out);
/* Writes ms as the shortest exact unit: "0s", "250ms", "10s", "2m", "1h". */
void he__conf_fmt_ms(unsigned ms, char *buf, size_t len);

#endif
