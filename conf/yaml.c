/* conf/yaml.c: walks a libyaml document against the key table. The walk is
 * driven by the table, never by the document, so its depth is bounded by
 * the schema (top level, sections as deep as the table nests them, e.g.
 * cache.ttl, then a list) whatever the input nests or aliases. libyaml
 * itself is not: composing a document costs time that grows with the
 * square of its nesting, so the events are read once first and a file
 * nested past HE_CONF_MAX_DEPTH is refused before it is composed. Every
 * error is "name:line:col: key: ...", 1-based, pointing at the node at
 * fault. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "conf/internal.h"

/* Levels of collections, the top mapping being 1. The schema needs 4
 * (top, section, cache.ttl, a list); libyaml takes seconds at 64k. */
#define HE_CONF_MAX_DEPTH 64

typedef struct he_conf_walk {
    const char *name; /* file name for messages */
    char namebuf[HE__CONF_NAME_MAX + 4];
    yaml_document_t *doc;
    he_conf_t *c;
    char *err;
    size_t errlen;
    unsigned char seen[HE__CONF_MAX_KEYS];
    yaml_mark_t key_mark[HE__CONF_MAX_KEYS]; /* where a key was given, for duplicates */
    yaml_mark_t val_mark[HE__CONF_MAX_KEYS]; /* and its value, for cross-key errors */
    /* auth: a list of rules, each a mapping of its own keys (conf/auth.c) */
    bool auth_seen;
    yaml_mark_t auth_mark;
    yaml_mark_t auth_rule_mark[HE_CONF_MAX_AUTH];
    yaml_mark_t auth_val_mark[HE_CONF_MAX_AUTH][16];
} he_conf_walk_t;

/* Formats "name:line:col: key: fmt..." (key may be NULL) and returns rc. */
static int he_conf_walk_fail(he_conf_walk_t *w, yaml_mark_t mark, const char *key, int rc,
                             const char *fmt, ...)
{
    va_list ap;
    size_t n;

    if (w->err == NULL || w->errlen == 0) return rc;
    snprintf(w->err, w->errlen, "%s:%zu:%zu: %s%s", w->name, mark.line + 1, mark.column + 1,
             key ? key : "", key ? ": " : "");
    n = strlen(w->err);
    va_start(ap, fmt);
    if (n + 1 < w->errlen) vsnprintf(w->err + n, w->errlen - n, fmt, ap);
    va_end(ap);
    return rc;
}

static const char *he_conf_node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

/* A plain "", "~" or "null": YAML's null, which we read as "". */
static int he_conf_is_null(const yaml_node_t *n)
{
    const char *v = (const char *)n->data.scalar.value;

    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* Levenshtein distance, for "did you mean"; 99 when either is too long. */
static unsigned he_conf_distance(const char *a, size_t la, const char *b)
{
    unsigned row[33];
    size_t lb = strlen(b);

    if (la > 32 || lb > 32) return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *he_conf_leaf(size_t i)
{
    const char *dot = strrchr(he__conf_keys[i].name, '.');
    return dot ? dot + 1 : he__conf_keys[i].name;
}

/* "unknown key, did you mean "x"? (valid here: a, b, c)" */
static int he_conf_walk_unknown(he_conf_walk_t *w, const yaml_node_t *kn, int section)
{
    const char *leaf = (const char *)kn->data.scalar.value;
    size_t len = kn->data.scalar.length;
    char path[96], valid[320] = "", hint[64] = "";
    unsigned best = 99;
    size_t o;

    /* The key as typed, made printable and bounded for the message. */
    o = (size_t)snprintf(path, sizeof(path), "%s%s", section < 0 ? "" : he__conf_keys[section].name,
                         section < 0 ? "" : ".");
    for (size_t i = 0; i < len && o + 4 < sizeof(path); i++) {
        unsigned char ch = (unsigned char)leaf[i];
        path[o++] = ch > 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    path[o] = '\0';

    for (size_t i = 0, n = 0; i < he__conf_nkeys; i++) {
        unsigned d;
        if (!he__conf_in_section(i, section)) continue;
        o = strlen(valid);
        snprintf(valid + o, sizeof(valid) - o, "%s%s", n++ ? ", " : "", he_conf_leaf(i));
        d = he_conf_distance(leaf, len, he_conf_leaf(i));
        /* Close enough to be a typo, not just another short word. */
        if (d < best && d <= (len > 4 ? 2u : 1u)) {
            best = d;
            snprintf(hint, sizeof(hint), ", did you mean \"%s\"?", he_conf_leaf(i));
        }
    }
    return he_conf_walk_fail(w, kn->start_mark, path, -EINVAL, "unknown key%s (valid here: %s)",
                             hint, valid);
}

/* Sets a non-section key from its value node: a scalar, or for keys that
 * take one, a list of scalars. */
static int he_conf_walk_value(he_conf_walk_t *w, const he__conf_key_t *k, yaml_node_t *vn)
{
    char why[HE_CONF_ERR_MAX], expect[256];
    int rc;

    if (vn->type == YAML_SCALAR_NODE) {
        const char *v = (const char *)vn->data.scalar.value;
        size_t len = vn->data.scalar.length;
        if (he_conf_is_null(vn)) v = "", len = 0;
        rc = he__conf_set(w->c, k, v, len, -1, why, sizeof(why));
        if (rc < 0) return he_conf_walk_fail(w, vn->start_mark, k->name, rc, "%s", why);
        return 0;
    }
    he__conf_expect(k, expect, sizeof(expect));
    if (vn->type != YAML_SEQUENCE_NODE || !he__conf_takes_list(k))
        return he_conf_walk_fail(w, vn->start_mark, k->name, -EINVAL, "expected %s, got %s", expect,
                                 he_conf_node_kind(vn));
    if (vn->data.sequence.items.start == vn->data.sequence.items.top) {
        if (!(k->flags & HE__CONF_F_EMPTY_OK))
            return he_conf_walk_fail(w, vn->start_mark, k->name, -EINVAL,
                                     "expected %s, got an empty list", expect);
        /* "[]" says what "" says for such a key: no entries. */
        rc = he__conf_set(w->c, k, "", 0, -1, why, sizeof(why));
        if (rc < 0) return he_conf_walk_fail(w, vn->start_mark, k->name, rc, "%s", why);
        return 0;
    }

    for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top;
         it++) {
        yaml_node_t *in = yaml_document_get_node(w->doc, *it);
        int idx = (int)(it - vn->data.sequence.items.start);
        if (in == NULL) return -EINVAL;
        if (in->type != YAML_SCALAR_NODE)
            return he_conf_walk_fail(w, in->start_mark, k->name, -EINVAL,
                                     "expected a list of scalars, got %s in it",
                                     he_conf_node_kind(in));
        rc = he__conf_set(w->c, k, (const char *)in->data.scalar.value, in->data.scalar.length, idx,
                          why, sizeof(why));
        if (rc < 0) return he_conf_walk_fail(w, in->start_mark, k->name, rc, "%s", why);
    }
    return 0;
}

/* auth: a list of rules, each a mapping of the keys of conf/auth.c. The
 * rules are checked once the whole file is read (he_conf_walk_auth_check),
 * since cache.key_params may come after them. */
static int he_conf_walk_auth(he_conf_walk_t *w, yaml_node_t *kn, yaml_node_t *vn)
{
    char why[HE_CONF_ERR_MAX], name[48];

    if (w->auth_seen)
        return he_conf_walk_fail(w, kn->start_mark, "auth", -EINVAL,
                                 "duplicate key (first given at line %zu)", w->auth_mark.line + 1);
    w->auth_seen = true;
    w->auth_mark = kn->start_mark;
    w->c->nauth = 0;
    if (he_conf_is_null(vn)) return 0;
    if (vn->type != YAML_SEQUENCE_NODE)
        return he_conf_walk_fail(w, vn->start_mark, "auth", -EINVAL,
                                 "expected a list of rules (mappings), got %s",
                                 he_conf_node_kind(vn));
    for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top;
         it++) {
        yaml_node_t *rn = yaml_document_get_node(w->doc, *it);
        unsigned ri = w->c->nauth;
        he_conf_auth_t *r;
        unsigned char seen[16] = {0};

        if (rn == NULL) return -EINVAL;
        if (ri == HE_CONF_MAX_AUTH)
            return he_conf_walk_fail(w, rn->start_mark, "auth", -EINVAL,
                                     "expected at most %d rules", HE_CONF_MAX_AUTH);
        snprintf(name, sizeof(name), "auth[%u]", ri);
        if (rn->type != YAML_MAPPING_NODE)
            return he_conf_walk_fail(w, rn->start_mark, name, -EINVAL,
                                     "expected a rule (a mapping of prefix, scheme, keys, ...), "
                                     "got %s",
                                     he_conf_node_kind(rn));
        r = &w->c->auth[ri];
        he__conf_auth_init(r);
        w->c->nauth = ri + 1;
        w->auth_rule_mark[ri] = rn->start_mark;
        for (yaml_node_pair_t *p = rn->data.mapping.pairs.start; p < rn->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
            yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
            const char *key;
            size_t klen, ki;
            int rc;

            if (k == NULL || v == NULL) return -EINVAL;
            if (k->type != YAML_SCALAR_NODE)
                return he_conf_walk_fail(w, k->start_mark, name, -EINVAL,
                                         "expected a key name, got %s", he_conf_node_kind(k));
            key = (const char *)k->data.scalar.value;
            klen = k->data.scalar.length;
            for (ki = 0; he__conf_auth_keys[ki]; ki++)
                if (strlen(he__conf_auth_keys[ki]) == klen &&
                    memcmp(he__conf_auth_keys[ki], key, klen) == 0)
                    break;
            if (!he__conf_auth_keys[ki]) {
                char valid[256] = "";
                for (size_t j = 0; he__conf_auth_keys[j]; j++)
                    he__conf_cat(valid, sizeof(valid), j ? ", " : ""),
                        he__conf_cat(valid, sizeof(valid), he__conf_auth_keys[j]);
                return he_conf_walk_fail(w, k->start_mark, name, -EINVAL,
                                         "unknown key \"%.40s\" (valid here: %s)", key, valid);
            }
            snprintf(name, sizeof(name), "auth[%u].%s", ri, he__conf_auth_keys[ki]);
            if (seen[ki])
                return he_conf_walk_fail(w, k->start_mark, name, -EINVAL, "duplicate key");
            seen[ki] = 1;
            w->auth_val_mark[ri][ki] = v->start_mark;
            if (v->type == YAML_SEQUENCE_NODE && he__conf_auth_takes_list(key, klen)) {
                if (v->data.sequence.items.start == v->data.sequence.items.top)
                    rc = he__conf_auth_set(r, key, klen, "", 0, -1, why, sizeof(why));
                else
                    rc = 0;
                for (yaml_node_item_t *li = v->data.sequence.items.start;
                     rc == 0 && li < v->data.sequence.items.top; li++) {
                    yaml_node_t *ln = yaml_document_get_node(w->doc, *li);
                    if (ln == NULL) return -EINVAL;
                    if (ln->type != YAML_SCALAR_NODE)
                        return he_conf_walk_fail(w, ln->start_mark, name, -EINVAL,
                                                 "expected a list of scalars, got %s in it",
                                                 he_conf_node_kind(ln));
                    rc = he__conf_auth_set(r, key, klen, (const char *)ln->data.scalar.value,
                                           ln->data.scalar.length,
                                           (int)(li - v->data.sequence.items.start), why,
                                           sizeof(why));
                    if (rc < 0) return he_conf_walk_fail(w, ln->start_mark, name, rc, "%s", why);
                }
            } else if (v->type == YAML_SCALAR_NODE) {
                const char *sv = (const char *)v->data.scalar.value;
                size_t sl = v->data.scalar.length;
                if (he_conf_is_null(v)) sv = "", sl = 0;
                rc = he__conf_auth_set(r, key, klen, sv, sl, -1, why, sizeof(why));
            } else {
                return he_conf_walk_fail(w, v->start_mark, name, -EINVAL, "expected %s, got %s",
                                         he__conf_auth_takes_list(key, klen) ? "a scalar or a list"
                                                                             : "a scalar",
                                         he_conf_node_kind(v));
            }
            if (rc < 0) return he_conf_walk_fail(w, v->start_mark, name, rc, "%s", why);
            snprintf(name, sizeof(name), "auth[%u]", ri);
        }
    }
    return 0;
}

/* Each rule against the whole file: required keys, the scheme's own
 * rules, cache.key_params. */
static int he_conf_walk_auth_check(he_conf_walk_t *w)
{
    char why[HE_CONF_ERR_MAX], name[48];
    for (unsigned i = 0; i < w->c->nauth; i++) {
        const char *key;
        yaml_mark_t mark = w->auth_rule_mark[i];
        int rc = he__conf_auth_check(w->c, &w->c->auth[i], &key, why, sizeof(why));
        if (rc == 0) continue;
        snprintf(name, sizeof(name), "auth[%u]%s%s", i, key ? "." : "", key ? key : "");
        for (size_t ki = 0; key && he__conf_auth_keys[ki]; ki++)
            if (strcmp(he__conf_auth_keys[ki], key) == 0 && w->auth_val_mark[i][ki].line + w->auth_val_mark[i][ki].column)
                mark = w->auth_val_mark[i][ki];
        return he_conf_walk_fail(w, mark, name, rc, "%s", why);
    }
    return 0;
}

/* Walks the keys of one mapping: the top level (section -1) or a section. */
static int he_conf_walk_map(he_conf_walk_t *w, yaml_node_t *map, int section)
{
    char expect[256];

    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = yaml_document_get_node(w->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(w->doc, p->value);
        const he__conf_key_t *k;
        int idx, rc;

        if (kn == NULL || vn == NULL) return -EINVAL;
        if (kn->type != YAML_SCALAR_NODE)
            return he_conf_walk_fail(w, kn->start_mark,
                                     section < 0 ? NULL : he__conf_keys[section].name, -EINVAL,
                                     "expected a key name, got %s", he_conf_node_kind(kn));
        if (section < 0 && kn->data.scalar.length == 4 &&
            memcmp(kn->data.scalar.value, "auth", 4) == 0) {
            if ((rc = he_conf_walk_auth(w, kn, vn)) < 0) return rc;
            continue;
        }
        idx = he__conf_find(section, (const char *)kn->data.scalar.value, kn->data.scalar.length);
        if (idx < 0) return he_conf_walk_unknown(w, kn, section);
        k = &he__conf_keys[idx];
        if (w->seen[idx])
            return he_conf_walk_fail(w, kn->start_mark, k->name, -EINVAL,
                                     "duplicate key (first given at line %zu)",
                                     w->key_mark[idx].line + 1);
        w->seen[idx] = 1;
        w->key_mark[idx] = kn->start_mark;
        w->val_mark[idx] = vn->start_mark;

        if (k->type != HE__CONF_SECTION) {
            rc = he_conf_walk_value(w, k, vn);
        } else if (vn->type == YAML_MAPPING_NODE) {
            rc = he_conf_walk_map(w, vn, idx);
        } else if (he_conf_is_null(vn)) {
            rc = 0; /* "limits:" with every key commented out */
        } else {
            he__conf_expect(k, expect, sizeof(expect));
            rc = he_conf_walk_fail(w, vn->start_mark, k->name, -EINVAL, "expected %s, got %s",
                                   expect, he_conf_node_kind(vn));
        }
        if (rc < 0) return rc;
    }
    return 0;
}

/* Turns libyaml's error into "name:line:col: problem (context)". */
static int he_conf_yaml_error(he_conf_walk_t *w, const yaml_parser_t *p, const char *buf,
                              size_t len)
{
    yaml_mark_t mark = p->problem_mark;
    const char *problem = p->problem ? p->problem : "unknown error";

    if (p->error == YAML_MEMORY_ERROR) {
        if (w->err && w->errlen) snprintf(w->err, w->errlen, "%s: out of memory", w->name);
        return -ENOMEM;
    }
    if (p->error == YAML_READER_ERROR) {
        /* The reader reports a byte offset only; count lines ourselves. */
        memset(&mark, 0, sizeof(mark));
        for (size_t i = 0; i < p->problem_offset && i < len; i++) {
            if (buf[i] == '\n') {
                mark.line++;
                mark.column = 0;
            } else {
                mark.column++;
            }
        }
        return he_conf_walk_fail(w, mark, NULL, -EINVAL, "invalid YAML text: %s", problem);
    }
    if (p->context)
        return he_conf_walk_fail(w, mark, NULL, -EINVAL, "YAML syntax error: %s (%s at %zu:%zu)",
                                 problem, p->context, p->context_mark.line + 1,
                                 p->context_mark.column + 1);
    return he_conf_walk_fail(w, mark, NULL, -EINVAL, "YAML syntax error: %s", problem);
}

/* Reads the events of the whole stream, counting nesting as they come, and
 * stops at the first collection past HE_CONF_MAX_DEPTH. A syntax error
 * ends the count: the load that follows reports it as it always has. */
static int he_conf_check_depth(he_conf_walk_t *w, const char *buf, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    unsigned depth = 0;
    int rc = 0, done = 0;

    if (!yaml_parser_initialize(&parser)) {
        if (w->err && w->errlen) snprintf(w->err, w->errlen, "%s: out of memory", w->name);
        return -ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    while (!done && yaml_parser_parse(&parser, &ev)) {
        switch (ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > HE_CONF_MAX_DEPTH) {
                rc = he_conf_walk_fail(w, ev.start_mark, NULL, -EINVAL,
                                       "YAML nested deeper than %d levels", HE_CONF_MAX_DEPTH);
                done = 1;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc;
}

static int he_conf_walk_doc(he_conf_walk_t *w, yaml_parser_t *parser, const char *buf, size_t len)
{
    yaml_node_t *root = yaml_document_get_root_node(w->doc);
    yaml_document_t next;
    char why[HE_CONF_ERR_MAX];
    int rc, bad;

    if (root != NULL && root->type == YAML_MAPPING_NODE) {
        rc = he_conf_walk_map(w, root, -1);
        if (rc < 0) return rc;
    } else if (root != NULL && !he_conf_is_null(root)) {
        return he_conf_walk_fail(w, root->start_mark, NULL, -EINVAL,
                                 "expected a mapping of keys at the top level, got %s",
                                 he_conf_node_kind(root));
    }

    /* One document per file: a second one is most likely a pasting mistake
     * and would otherwise be silently ignored. */
    if (!yaml_parser_load(parser, &next)) return he_conf_yaml_error(w, parser, buf, len);
    root = yaml_document_get_root_node(&next);
    rc = 0;
    if (root != NULL)
        rc = he_conf_walk_fail(w, root->start_mark, NULL, -EINVAL,
                               "expected a single YAML document, found a second one");
    yaml_document_delete(&next);
    if (rc < 0) return rc;

    rc = he__conf_check(w->c, w->seen, &bad, why, sizeof(why));
    if (rc < 0) {
        /* The blamed key is one the file gave (unless the defaults alone
         * break a rule, which the unit tests rule out), so point at it. */
        return he_conf_walk_fail(w, w->val_mark[bad], he__conf_keys[bad].name, rc, "%s", why);
    }
    if ((rc = he_conf_walk_auth_check(w)) < 0) return rc;
    if (w->c->nauth) return 0;
    /* Valid, but a file that sets nothing is most likely the wrong file
     * (a config management run that wrote it out empty, say). */
    for (size_t i = 0; i < he__conf_nkeys; i++)
        if (w->seen[i] && he__conf_keys[i].type != HE__CONF_SECTION) return 0;
    he__conf_warn("%s is empty: running on built-in defaults", w->name);
    return 0;
}

int he__conf_yaml_load(he_conf_t *c, const char *name, const char *buf, size_t len, char *err,
                       size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    he_conf_walk_t w;
    int rc;

    memset(&w, 0, sizeof(w));
    w.name = he__conf_msg_name(name ? name : "(string)", w.namebuf, sizeof(w.namebuf));
    w.c = c;
    w.err = err;
    w.errlen = errlen;
    w.doc = &doc;

    rc = he_conf_check_depth(&w, buf, len);
    if (rc < 0) return rc;
    if (!yaml_parser_initialize(&parser)) {
        if (err && errlen) snprintf(err, errlen, "%s: out of memory", w.name);
        return -ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = he_conf_yaml_error(&w, &parser, buf, len);
    } else {
        rc = he_conf_walk_doc(&w, &parser, buf, len);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return rc;
}
