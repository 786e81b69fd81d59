/* cache: the flow results of the cache's state machines. */
#ifndef HE_CACHE_RESULT_H
#define HE_CACHE_RESULT_H

/* Flow results (errors are negative errno values). */
enum {
    HE_CACHE_OK = 0,    /* done */
    HE_CACHE_AGAIN = 1, /* an operation was prepared: submit it, then call _complete */
};

#endif
