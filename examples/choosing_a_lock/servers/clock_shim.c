/*
 * A wall-clock offset for one process, preloaded (LD_PRELOAD) into the redis-server of the
 * clock-jump incident: CLOCK_REALTIME (clock_gettime, gettimeofday, time) runs CLOCK_SHIM_FILE's
 * milliseconds ahead, read on every call, so the orchestrator moves the clock at run time by
 * rewriting the file. CLOCK_MONOTONIC is left alone, as an NTP step leaves it alone.
 *
 * libfaketime would be the tool, but Debian's redis-server links jemalloc, and libfaketime 0.9.10
 * cannot start under it ("Unexpected recursive calls to clock_gettime()", libfaketime#130): this
 * shim calls the kernel directly (syscall), never dlsym or malloc, so it has no such loop.
 *
 * Built by servers.rs: cc -shared -fPIC -O2 -o clock_shim.so clock_shim.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int shim_fd = -2;
static long long shim_last_ms = 0;

static long long offset_ms(void) {
    if (shim_fd == -2) {
        const char *path = getenv("CLOCK_SHIM_FILE");
        shim_fd = path ? (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC) : -1;
    }
    if (shim_fd < 0) {
        return 0;
    }
    char buf[32];
    long n = syscall(SYS_pread64, shim_fd, buf, sizeof buf - 1, 0);
    /* An empty read (the file being rewritten) keeps the last offset. */
    if (n > 0) {
        buf[n] = 0;
        shim_last_ms = strtoll(buf, NULL, 10);
    }
    return shim_last_ms;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int r = (int)syscall(SYS_clock_gettime, clock, ts);
    if (r == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        long long off = offset_ms();
        long long ns = (long long)ts->tv_nsec + (off % 1000) * 1000000LL;
        ts->tv_sec += off / 1000 + ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    if (out) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
