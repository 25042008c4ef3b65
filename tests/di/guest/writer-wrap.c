/*
 * writer-wrap: the test bed's record of which program erased the array and its peak memory.
 *
 * The guest harness puts this program where partman-crypto's crypto_do_wipe runs its writer
 * (/bin/blockdev-wipe, or /usr/bin/mdpilot for a patched crypto_do_wipe) and the writer
 * itself at PATH.measured. Run as PATH ARGS, it runs PATH.measured with the same argv
 * (argv[0] unchanged: mdpilot dispatches on its name), forwards SIGTERM/SIGINT/SIGHUP to it
 * (the progress bar's Cancel), waits for it and appends to $WRITER_REPORT (default
 * /tmp/writer-report):
 *   WRITER <comm> <the program's resolved path>
 *   WRITER_PEAK_KIB <ru_maxrss of the writer: the kernel's peak RSS over its whole life>
 *   WRITER_STATUS <its exit status, or 128+signal>
 * and then ends as the writer ended (the same status, or killed by the same signal), so
 * crypto_do_wipe's `wait` sees what it would have seen. Deterministic: nothing is sampled.
 * Test bed only; built statically by tests/di/run (gcc -static).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child;

static void forward(int sig) {
    if (child > 0)
        kill(child, sig);
}

int main(int argc, char **argv) {
    char target[PATH_MAX], real[PATH_MAX];
    if (argc < 1 || snprintf(target, sizeof target, "%s.measured", argv[0]) >= (int)sizeof target)
        return 1;
    if (!realpath(target, real)) {
        fprintf(stderr, "writer-wrap: %s: %s\n", target, strerror(errno));
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execv(target, argv);
        fprintf(stderr, "writer-wrap: exec %s: %s\n", target, strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(child, &status, 0, &ru) < 0)
        if (errno != EINTR)
            return 1;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    /* A moved program (not a link) is named by the path it was run by. */
    size_t n = strlen(real), m = strlen(".measured");
    if (n > m && strcmp(real + n - m, ".measured") == 0)
        real[n - m] = 0;
    const char *report = getenv("WRITER_REPORT");
    FILE *f = fopen(report ? report : "/tmp/writer-report", "a");
    if (f) {
        const char *base = strrchr(real, '/');
        fprintf(f, "WRITER %s %s\nWRITER_PEAK_KIB %ld\nWRITER_STATUS %d\n", base ? base + 1 : real,
                real, ru.ru_maxrss, code);
        fclose(f);
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
    }
    return code;
}
