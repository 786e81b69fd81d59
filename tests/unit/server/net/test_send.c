/* server/net/send.c: a failed sendfile of a file counts
 * against the file only when the file itself cannot be read where the
 * send failed; an errno shared with the socket (EBADMSG from a kTLS
 * socket that got a corrupt record) leaves a readable file alone. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "he_test.h"
#include "server/net/net.h"

int main(void)
{
    char path[] = "/tmp/he-test-rcache-XXXXXX";
    int fd = mkstemp(path), dfd;
    HE_CHECK(fd >= 0);
    HE_CHECK_INT(write(fd, "abcdef", 6), 6);

    /* readable at the offset: the socket's error, whatever the errno */
    HE_CHECK_INT(he__send_file_error(fd, 0, -EBADMSG), 0);
    HE_CHECK_INT(he__send_file_error(fd, 5, -EIO), 0);
    /* not an errno a file read gives: never the file's */
    HE_CHECK_INT(he__send_file_error(fd, 100, -EPIPE), 0);
    HE_CHECK_INT(he__send_file_error(fd, 100, -ECONNRESET), 0);
    /* the file ends before the offset: short of what was promised */
    HE_CHECK_INT(he__send_file_error(fd, 6, -EIO), -EBADMSG);
    /* the file cannot be read: its own errno */
    dfd = open("/tmp", O_RDONLY | O_DIRECTORY);
    HE_CHECK(dfd >= 0);
    HE_CHECK_INT(he__send_file_error(dfd, 0, -EBADMSG), -EISDIR);
    close(dfd);
    close(fd);
    unlink(path);
    HE_TEST_MAIN_END();
}
