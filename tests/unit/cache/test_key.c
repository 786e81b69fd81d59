/* cache/key.c: the key is the normalized path plus only the configured
 * query parameters, in config order, canonically encoded, and on a
 * playlist the LL-HLS delivery directives (rfc8216bis 6.2.5.2). */
#include <errno.h>
#include <string.h>

#include "cache/key.h"
#include "he_test.h"

int main(void)
{
    static he_conf_t conf;
    static const struct {
        const char *target;
        const char *key; /* NULL: expect err */
        int err;
    } cases[] = {
        {"/a/b.ts", "a/b.ts", 0},
        {"/a//./b.ts", "a/b.ts", 0},
        {"/", "", 0},
        {"/a/b.ts?token=abc&expires=1", "a/b.ts", 0},
        {"/a/b.ts?lang=en", "a/b.ts?lang=en", 0},
        {"/a/b.ts?bw=1&lang=en", "a/b.ts?lang=en&bw=1", 0}, /* config order */
        {"/a/b.ts?lang=en&bw=1", "a/b.ts?lang=en&bw=1", 0},
        {"/a/b.ts?sig=x&bw=1&sig=y&lang=en", "a/b.ts?lang=en&bw=1", 0},
        {"/a/b.ts?lang=%65n", "a/b.ts?lang=en", 0},     /* decoded */
        {"/a/b.ts?lang=a%2fb", "a/b.ts?lang=a%2Fb", 0}, /* canonical escape */
        {"/a/b.ts?lang=a b", "a/b.ts?lang=a%20b", 0},
        {"/a/b.ts?lang", "a/b.ts?lang=", 0}, /* no value */
        {"/a/b.ts?lang=", "a/b.ts?lang=", 0},
        {"/a/b.ts?lang=en&lang=fr", "a/b.ts?lang=en&lang=fr", 0}, /* request order */
        {"/a/b.ts?l%61ng=en", "a/b.ts?lang=en", 0},               /* encoded name */
        {"/a/b.ts?LANG=en", "a/b.ts", 0},                         /* names are case-sensitive */
        {"/a/b.ts?lang=en#frag&bw=2", "a/b.ts?lang=en", 0},       /* fragment ignored */
        {"/a/b.ts?lang=%zz", NULL, -EINVAL},
        {"/a/b.ts?lang=%4", NULL, -EINVAL},
        {"/a/../b.ts", NULL, -EINVAL},
        {"a/b.ts", NULL, -EINVAL},
        {"/a/b.ts?token=%zz", "a/b.ts", 0}, /* ignored parameters are not judged */
        /* a decoded '?', '#' or '%' of the path is escaped again: the
         * first '?' of a key starts its parameters */
        {"/x.ts%3Flang=en", "x.ts%3Flang=en", 0},
        {"/x.ts%3flang=en?lang=en", "x.ts%3Flang=en?lang=en", 0},
        {"/x.ts%23lang=en", "x.ts%23lang=en", 0},
        {"/100%25.ts", "100%25.ts", 0},
        {"/a%2541.ts", "a%2541.ts", 0}, /* "a%41.ts", not "aA.ts" */
        {"/a%41.ts", "aA.ts", 0},
        /* values and names in RFC 3986 normal form: only unreserved
         * escapes are decoded, reserved bytes stay as sent */
        {"/a/b.ts?lang=a+b", "a/b.ts?lang=a+b", 0},
        {"/a/b.ts?lang=a%2Bb", "a/b.ts?lang=a%2Bb", 0},
        {"/a/b.ts?lang=a%2bb", "a/b.ts?lang=a%2Bb", 0},
        {"/a/b.ts?lang=a/b", "a/b.ts?lang=a/b", 0},
        {"/a/b.ts?lang=a=b", "a/b.ts?lang=a=b", 0},
        {"/a/b.ts?lang=a%3Db", "a/b.ts?lang=a%3Db", 0},
        {"/a/b.ts?lang=%7e%41", "a/b.ts?lang=~A", 0},
        {"/a/b.ts?lang=\xc3\xa9", "a/b.ts?lang=%C3%A9", 0}, /* raw UTF-8 = its escapes */
        {"/a/b.ts?lang=%c3%a9", "a/b.ts?lang=%C3%A9", 0},
        {"/a/b.ts?lan%67=en", "a/b.ts?lang=en", 0},
        {"/a/b.ts?lang%2B=en", "a/b.ts", 0}, /* another name */
    };
    he_cache_key_t k, k2;

    he_conf_defaults(&conf);
    strcpy(conf.cache_key_params[0], "lang");
    strcpy(conf.cache_key_params[1], "bw");
    conf.ncache_key_params = 2;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = he_cache_key_make(&conf, cases[i].target, strlen(cases[i].target), &k);
        if (cases[i].key) {
            HE_CHECK_INT(rc, 0);
            if (rc == 0) {
                HE_CHECK_STR(k.s, cases[i].key);
                HE_CHECK_INT(k.len, strlen(cases[i].key));
                HE_CHECK_INT(k.hash, he_cache_hash(cases[i].key, strlen(cases[i].key)));
                HE_CHECK_INT(k.path_len, strcspn(cases[i].key, "?"));
            }
        } else {
            HE_CHECK_INT(rc, cases[i].err);
        }
    }

    /* equal keys from different targets, different keys from different values */
    he_cache_key_make(&conf, "/x.ts?bw=2&lang=de&t=1", 22, &k);
    he_cache_key_make(&conf, "/x.ts?lang=de&t=9&bw=2", 22, &k2);
    HE_CHECK(k.hash == k2.hash && strcmp(k.s, k2.s) == 0);
    he_cache_key_make(&conf, "/x.ts?bw=3&lang=de&t=1", 22, &k2);
    HE_CHECK(k.hash != k2.hash);

    /* without configured parameters the query never matters */
    conf.ncache_key_params = 0;
    HE_CHECK_INT(he_cache_key_make(&conf, "/x.ts?lang=%zz", 14, &k), 0);
    HE_CHECK_STR(k.s, "x.ts");

    /* too long */
    {
        static char big[HE_CACHE_KEY_MAX + 16];
        big[0] = '/';
        memset(big + 1, 'a', sizeof(big) - 2);
        HE_CHECK_INT(he_cache_key_make(&conf, big, sizeof(big) - 1, &k), -ENAMETOOLONG);
    }

    /* "/x.ts%3Flang=en" (a file named "x.ts?lang=en") and "/x.ts?lang=en"
     * are two resources */
    conf.ncache_key_params = 2;
    he_cache_key_make(&conf, "/x.ts%3Flang=en", 15, &k);
    he_cache_key_make(&conf, "/x.ts?lang=en", 13, &k2);
    HE_CHECK(strcmp(k.s, k2.s) != 0 && k.hash != k2.hash);
    HE_CHECK_INT(k.path_len, 14);
    HE_CHECK_INT(k2.path_len, 4);
    /* "+" and %2B are two values for an origin that reads forms */
    he_cache_key_make(&conf, "/x.ts?lang=a+b", 14, &k);
    he_cache_key_make(&conf, "/x.ts?lang=a%2Bb", 16, &k2);
    HE_CHECK(strcmp(k.s, k2.s) != 0 && k.hash != k2.hash);

    /* configured names that are not in canonical form ('^' is escaped,
     * a literal '%' is a byte) match their escapes, and names of every
     * length around them are told apart */
    {
        he_conf_t c2 = conf;
        strcpy(c2.cache_key_params[0], "a^b");
        strcpy(c2.cache_key_params[1], "p%q");
        strcpy(c2.cache_key_params[2], "ab");
        c2.ncache_key_params = 3;
        HE_CHECK_INT(he_cache_key_make(&c2, "/x.ts?a%5eb=1&a^b=2&ab=3&a=4&abc=5", 34, &k), 0);
        HE_CHECK_STR(k.s, "x.ts?a%5Eb=1&a%5Eb=2&ab=3");
        HE_CHECK_INT(he_cache_key_make(&c2, "/x.ts?p%25q=1&pq=3&p%2525q=4", 28, &k), 0);
        HE_CHECK_STR(k.s, "x.ts?p%25q=1");
        HE_CHECK_INT(he_cache_key_make(&c2, "/x.ts?%61%62=1&a%62=2&A%62=3", 28, &k), 0);
        HE_CHECK_STR(k.s, "x.ts?ab=1&ab=2");
    }

    /* "/" + a key is a target with the same key */
    {
        static const char *const targets[] = {
            "/x.ts%3Flang=en?lang=fr",
            "/d%25r/%23x.ts?bw=1&lang=a+b%2B%20",
            "/a b/c.ts?lang=%C3%A9&lang=x:y@z",
            "/v%3F/i.m3u8?lang=%3F%26%3D&bw=?",
        };
        for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
            char t[HE_CACHE_KEY_MAX + 1];
            HE_CHECK_INT(he_cache_key_make(&conf, targets[i], strlen(targets[i]), &k), 0);
            t[0] = '/';
            memcpy(t + 1, k.s, k.len + 1);
            HE_CHECK_INT(he_cache_key_make(&conf, t, k.len + 1, &k2), 0);
            HE_CHECK_STR(k2.s, k.s);
            HE_CHECK_INT(k2.path_len, k.path_len);
            /* and the path part names the same file */
            char p1[HE_CACHE_KEY_MAX], p2[HE_CACHE_KEY_MAX];
            int n1 = he_seg_url_normalize(targets[i], strlen(targets[i]), p1, sizeof(p1));
            int n2 = he_seg_url_normalize(t, k.path_len + 1, p2, sizeof(p2));
            HE_CHECK(n1 >= 0 && n1 == n2 && memcmp(p1, p2, (size_t)n1) == 0);
            /* what the SSD tier reads back splits the same way */
            HE_CHECK_INT(he_cache_key_set(&k2, k.s, k.len), 0);
            HE_CHECK_INT(k2.path_len, k.path_len);
        }
    }
    /* he_cache_key_path alone: the escaped path, no query */
    {
        char p[16];
        HE_CHECK_INT(he_cache_key_path("/a%3F.ts?x=1", 12, p, sizeof(p)), 7);
        HE_CHECK_STR(p, "a%3F.ts");
        HE_CHECK_INT(he_cache_key_path("/%25%25%25%25%25", 16, p, sizeof(p)), 15);
        HE_CHECK_STR(p, "%25%25%25%25%25");
        HE_CHECK_INT(he_cache_key_path("/%25%25%25%25%25%25", 19, p, sizeof(p)), -ENAMETOOLONG);
    }
    /* escaping may not overflow the key */
    {
        static char big[HE_CACHE_KEY_MAX + 512];
        size_t n = 1;
        big[0] = '/';
        while (n + 3 < HE_CACHE_KEY_MAX / 2)
            memcpy(big + n, "%3F", 3), n += 3;
        HE_CHECK_INT(he_cache_key_make(&conf, big, n, &k), 0); /* 3 bytes each again */
        HE_CHECK_INT(k.len, n - 1);
        while (n + 3 < sizeof(big))
            memcpy(big + n, "%3F", 3), n += 3;
        HE_CHECK_INT(he_cache_key_make(&conf, big, n, &k), -ENAMETOOLONG);
    }

    /* LL-HLS delivery directives (draft-pantos-hls-rfc8216bis 6.2.5.2):
     * _HLS_msn, _HLS_part and _HLS_skip are in a playlist's key whatever
     * cache.key_params says, after the configured names and in UTF-8
     * order of their names; other _HLS_ names are reserved for
     * directives and never keyed, even when configured */
    {
        static const struct {
            unsigned nconf; /* of conf: "lang", "bw" */
            const char *target, *key;
        } ll[] = {
            {0, "/l/p.m3u8?_HLS_msn=12", "l/p.m3u8?_HLS_msn=12"},
            {0, "/l/p.m3u8?_HLS_part=2&_HLS_msn=12", "l/p.m3u8?_HLS_msn=12&_HLS_part=2"},
            {0, "/l/p.m3u8?_HLS_skip=YES&_HLS_part=2&_HLS_msn=12",
             "l/p.m3u8?_HLS_msn=12&_HLS_part=2&_HLS_skip=YES"},
            {0, "/l/p.m3u8?_HLS_skip=v2", "l/p.m3u8?_HLS_skip=v2"},
            {0, "/l/p.m3u8?_HLS_msn=12&token=x&_HLS_foo=1&_HLS_report=../a.m3u8",
             "l/p.m3u8?_HLS_msn=12"},
            {0, "/l/p.m3u8?%5FHLS%5Fmsn=%31%32", "l/p.m3u8?_HLS_msn=12"}, /* canonical */
            {0, "/l/p.m3u8?_hls_msn=12&_HLS_MSN=12", "l/p.m3u8"},         /* case-sensitive */
            {0, "/l/p.m3u8?_HLS_msn", "l/p.m3u8?_HLS_msn="},
            {0, "/l/P.M3U8?_HLS_msn=1", "l/P.M3U8?_HLS_msn=1"},
            /* not a playlist: nothing _HLS_ is keyed */
            {0, "/l/s12.ts?_HLS_msn=12", "l/s12.ts"},
            {0, "/l/p.m3u8.ts?_HLS_msn=12", "l/p.m3u8.ts"},
            /* after the configured parameters, whatever the request order */
            {2, "/l/p.m3u8?_HLS_part=0&bw=1&_HLS_msn=3&lang=en",
             "l/p.m3u8?lang=en&bw=1&_HLS_msn=3&_HLS_part=0"},
            {2, "/l/s.ts?_HLS_part=0&bw=1", "l/s.ts?bw=1"},
        };
        for (size_t i = 0; i < sizeof(ll) / sizeof(ll[0]); i++) {
            conf.ncache_key_params = ll[i].nconf;
            HE_CHECK_INT(he_cache_key_make(&conf, ll[i].target, strlen(ll[i].target), &k), 0);
            HE_CHECK_STR(k.s, ll[i].key);
            HE_CHECK_INT(k.hash, he_cache_hash(ll[i].key, strlen(ll[i].key)));
            HE_CHECK_INT(k.path_len, strcspn(ll[i].key, "?"));
        }
        /* with no configuration at all */
        HE_CHECK_INT(he_cache_key_make(NULL, "/p.m3u8?_HLS_part=1&_HLS_msn=2", 30, &k), 0);
        HE_CHECK_STR(k.s, "p.m3u8?_HLS_msn=2&_HLS_part=1");
        /* a directive named in cache.key_params is keyed once, in its
         * directive place; another _HLS_ name configured is not keyed */
        {
            he_conf_t c3 = conf;
            strcpy(c3.cache_key_params[0], "_HLS_msn");
            strcpy(c3.cache_key_params[1], "_HLS_report");
            strcpy(c3.cache_key_params[2], "lang");
            c3.ncache_key_params = 3;
            HE_CHECK_INT(he_cache_key_make(&c3, "/p.m3u8?_HLS_report=x&_HLS_msn=4&lang=fr", 40, &k),
                         0);
            HE_CHECK_STR(k.s, "p.m3u8?lang=fr&_HLS_msn=4");
            HE_CHECK_INT(he_cache_key_make(&c3, "/s.ts?_HLS_msn=4&lang=fr", 24, &k), 0);
            HE_CHECK_STR(k.s, "s.ts?lang=fr");
        }
        /* two players asking for the same answer share one key; another
         * MSN is another key */
        conf.ncache_key_params = 0;
        he_cache_key_make(&conf, "/p.m3u8?_HLS_msn=7&_HLS_part=1", 30, &k);
        he_cache_key_make(&conf, "/p.m3u8?_HLS_part=1&cb=99&_HLS_msn=7", 36, &k2);
        HE_CHECK(k.hash == k2.hash && strcmp(k.s, k2.s) == 0);
        he_cache_key_make(&conf, "/p.m3u8?_HLS_msn=8&_HLS_part=1", 30, &k2);
        HE_CHECK(k.hash != k2.hash);
        /* "/" + a directive key is a target with the same key */
        {
            char t[HE_CACHE_KEY_MAX + 1];
            t[0] = '/';
            memcpy(t + 1, k.s, k.len + 1);
            HE_CHECK_INT(he_cache_key_make(&conf, t, k.len + 1, &k2), 0);
            HE_CHECK_STR(k2.s, k.s);
        }
        conf.ncache_key_params = 2;
    }

    /* he_cache_key_set round-trips */
    HE_CHECK_INT(he_cache_key_set(&k2, "a/b.ts?lang=en", 14), 0);
    HE_CHECK_INT(k2.path_len, 6);
    HE_CHECK_INT(k2.hash, he_cache_hash("a/b.ts?lang=en", 14));
    HE_TEST_MAIN_END();
}
