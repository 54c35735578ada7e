/* Run by styx-loader --user as someone else than root: tries to type into
 * the terminal it was started from (TIOCSTI on its stdin, stdout, stderr
 * and /dev/tty), as a hostile command would to have root's shell run what
 * it types. Prints one line, "tiocsti: KEY=VALUE ...": its session and its
 * parent's (the loader's), each attempt's outcome (ok or the errno's
 * name), and HOME, USER, LOGNAME; then waits for a signal (Ctrl-C; a
 * minute at most, should a failing test leave it). A USDT probe
 * (tty:tried) gives the loader something to attach to. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sdt.h>
#include <unistd.h>

/* What it types: seen echoed on the terminal if it got through. */
static const char typed[] = "zq-typed\n";

static const char *outcome(int ok) {
    if (ok)
        return "ok";
    switch (errno) {
    case EPERM: return "EPERM";
    case EIO: return "EIO";
    case ENOTTY: return "ENOTTY";
    case ENXIO: return "ENXIO";
    case EBADF: return "EBADF";
    default: return strerror(errno);
    }
}

/* Pushes `typed` into the input of the terminal `fd` is. */
static const char *type_into(int fd) {
    for (const char *c = typed; *c; c++)
        if (ioctl(fd, TIOCSTI, c) != 0)
            return outcome(0);
    return outcome(1);
}

int main(void) {
    DTRACE_PROBE(tty, tried);
    char line[512];
    int n = snprintf(line, sizeof line, "tiocsti: pid=%d sid=%d parent_sid=%d", getpid(),
                     getsid(0), getsid(getppid()));
    for (int fd = 0; fd <= 2; fd++)
        n += snprintf(line + n, sizeof line - n, " fd%d=%s", fd, type_into(fd));
    int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
    n += snprintf(line + n, sizeof line - n, " dev_tty=%s",
                  tty < 0 ? outcome(0) : type_into(tty));
    const char *names[] = {"HOME", "USER", "LOGNAME"};
    for (int i = 0; i < 3; i++) {
        const char *value = getenv(names[i]);
        n += snprintf(line + n, sizeof line - n, " %s=%s", names[i], value ? value : "(unset)");
    }
    printf("%s\n", line);
    fflush(stdout);
    alarm(60);
    pause();
    return 0;
}
