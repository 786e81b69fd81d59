/* conf internals shared by conf.c (API), keys.c (the key table), set.c (the
 * scalar setters and what each type expects), set_list.c (the list
 * setters), check.c (rules that span keys), value.c (scalar parsers) and
 * yaml.c (the libyaml walk). */
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
    HE__CONF_ENUM,        /* one of names[], stored as an unsigned-sized enum or a bool */
    HE__CONF_WORKERS,     /* 1..max or "auto" (0) */
    HE__CONF_LISTEN,      /* one address or a list: he_conf_listen_t[nmax] + count */
    HE__CONF_ADDR,        /* one address; "" or "off" = port 0 */
    HE__CONF_CPUS,        /* "auto" or a list of CPU numbers */
    HE__CONF_SIZE,        /* uint64_t bytes with a k/m/g/t suffix, min..max */
    HE__CONF_STRS,        /* one string or a list: char[nmax][size] + count */
    HE__CONF_STORES,      /* "DIR:SIZE" or a list: char[nmax][size], uint64_t[nmax], count */
    HE__CONF_FLAGS,       /* names[] entries or "all", one or a list: uint32_t bit per name */
    HE__CONF_TYPE_COUNT
} he__conf_type_t;

#define HE__CONF_F_NONEMPTY 1u /* strings: "" is not a valid value */
#define HE__CONF_F_HEADER 2u   /* strings: sent as a header value, so no control bytes */
#define HE__CONF_F_EMPTY_OK 4u /* lists: [], "" and null mean none (the default) */
#define HE__CONF_F_TOKEN 8u    /* string lists: RFC 9110 token characters but '&' */
#define HE__CONF_F_URL 16u     /* string lists: http:// or https:// base URLs */
#define HE__CONF_F_CIDR 32u    /* string lists: addresses, ranges or "loopback" */

/* Upper bound on the table size, for the per-load "seen" arrays. */
#define HE__CONF_MAX_KEYS 128

typedef struct he__conf_key {
    const char *name; /* dotted path: "workers", "limits.header_bytes", "cache.ttl.media" */
    he__conf_type_t type;
    unsigned flags;           /* HE__CONF_F_* */
    size_t off;               /* offset of the field (a list's array) in he_conf_t */
    size_t size;              /* strings: size of the char array (a list's: of one entry);
                                 enums: size of the field */
    size_t cnt_off;           /* lists: offset of the unsigned entry count */
    size_t aux_off;           /* stores: offset of the uint64_t sizes beside the directories */
    unsigned nmax;            /* lists: capacity of the array */
    uint64_t min, max;        /* integers, durations (ms) and sizes (bytes) */
    const char *const *names; /* enums, flags: names indexed by value (bit), NULL-terminated */
    const char *item, *items; /* lists: what an entry is, for messages ("address(es)") */
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
/* Index of the key with this full dotted name, or -1. */
int he__conf_index(const char *name);
/* Checks rules that span keys (uri_bytes <= header_bytes). seen[i] says
 * whether key i came from the file; on failure *bad is the key to blame and
 * why the text after "key: ". */
int he__conf_check(const he_conf_t *c, const unsigned char *seen, int *bad, char *why,
                   size_t whylen);

/* The list setters of set_list.c, with the signature of every setter. */
int he__conf_set_listen(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                        char *why, size_t whylen);
int he__conf_set_cpus(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                      char *why, size_t whylen);
int he__conf_set_strs(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                      char *why, size_t whylen);
int he__conf_set_stores(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                        char *why, size_t whylen);
int he__conf_set_flags(he_conf_t *c, const he__conf_key_t *k, const char *v, size_t len, int idx,
                       char *why, size_t whylen);

/* Message helpers of set.c. he__conf_quote writes v as a message shows it:
 * quoted, printable, at most 40 bytes then "...". he__conf_cat appends s to
 * the string in buf, truncating. */
void he__conf_quote(const char *v, size_t len, char *buf, size_t buflen);
void he__conf_cat(char *buf, size_t len, const char *s);

/* name as messages show it: long paths keep their last HE__CONF_NAME_MAX
 * bytes behind "...", so the line:col and the reason still fit in the
 * caller's HE_CONF_ERR_MAX. buf holds at least HE__CONF_NAME_MAX + 4. */
#define HE__CONF_NAME_MAX 200
const char *he__conf_msg_name(const char *name, char *buf, size_t len);

/* Passes one warning, formatted, to the he_conf_set_warn handler. */
void he__conf_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Walks the YAML in buf onto c (already holding defaults), then runs the
 * cross-key checks. Messages are prefixed with name. */
int he__conf_yaml_load(he_conf_t *c, const char *name, const char *buf, size_t len, char *err,
                       size_t errlen);

/* Scalars. Decimal digits only: no sign, fraction or exponent. -EINVAL or
 * -ERANGE (more than UINT_MAX). */
int he__conf_parse_uint(const char *s, size_t len, unsigned *out);
/* true/false, yes/no, on/off in any case. 0 or -EINVAL. */
int he__conf_parse_bool(const char *s, bool *out);
/* Writes ms as the shortest exact unit: "0s", "250ms", "10s", "2m", "1h",
 * "1d". */
void he__conf_fmt_ms(unsigned ms, char *buf, size_t len);
/* A size: decimal digits, then optionally one of k, m, g, t in either case
 * (powers of 1024). 0, -EINVAL, or -ERANGE past UINT64_MAX. */
int he__conf_parse_size(const char *s, size_t len, uint64_t *out);
/* Writes bytes in the largest exact unit: "0", "512", "16m", "1t". */
void he__conf_fmt_size(uint64_t bytes, char *buf, size_t len);
/* Whether s is a non-empty run of RFC 9110 token characters. */
int he__conf_is_token(const char *s, size_t len);
/* Checks an http:// or https:// base URL: host name, IPv4 or [IPv6]
 * literal, optional port 1..65535, optional path from "/" without spaces,
 * controls, '?' or '#'. 0, or -EINVAL with *what set to the part that was
 * expected ("a port in 1..65535 after the host"). */
int he__conf_check_url(const char *s, size_t len, const char **what);

/* auth.c: the keys of one auth rule (NULL-terminated, for messages);
 * a rule's defaults; one key's value (idx as for he__conf_set; -ENOENT for
 * a key no rule has); whether a key takes a list; the rules a whole rule
 * keeps (*key: the key to blame, NULL for the rule itself). */
extern const char *const he__conf_auth_keys[];
void he__conf_auth_init(he_conf_auth_t *r);
int he__conf_auth_set(he_conf_auth_t *r, const char *key, size_t klen, const char *v, size_t len,
                      int idx, char *why, size_t whylen);
int he__conf_auth_takes_list(const char *key, size_t klen);
int he__conf_auth_check(const he_conf_t *c, const he_conf_auth_t *r, const char **key, char *why,
                        size_t whylen);

#endif
