/* host.c: what pprt asks of the machine it runs on, for both drivers: the
 * CPUs this process may use and a rank's share of them, the CPU's model
 * name (pprt_device_kind, for --profile), the resident set now and at its
 * peak. Linux (/proc, sched_getaffinity, getrusage); nothing here runs a
 * stage. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "run.h"

void pprt_device_kind(const char *backend, pprt_precision precision, int threads, char *buf, size_t n) {
    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t len = strcspn(c, "\n");
        snprintf(model, sizeof model, "%.*s", (int)(len < sizeof model ? len : sizeof model - 1), c);
        break;
    }
    if (f) fclose(f);
    snprintf(buf, n, "%s %s, %d thread%s per stage, %s", backend ? backend : "?",
             precision == PPRT_BF16 ? "bf16" : precision == PPRT_TF32 ? "tf32" : precision == PPRT_FP16 ? "fp16" : "f32",
             threads, threads == 1 ? "" : "s", model);
}

size_t pprt_rss_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    bool ok = f && fscanf(f, "%llu %llu", &size, &res) == 2;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (size_t)res * (size_t)page : 0;
}

int pprt_cpus_allowed(int *ids, int max) {
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) {
                if (n < max) ids[n] = c;
                n++;
            }
    if (n == 0) {
        long k = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (k > 0 ? k : 1) && c < CPU_SETSIZE; c++, n++)
            if (n < max) ids[n] = (int)c;
    }
    return n;
}

int pprt_rank_cores(int local_ranks) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    long share = online / (local_ranks > 1 ? local_ranks : 1);
    int mine = pprt_cpus_allowed(NULL, 0);
    if (share > mine) share = mine;
    return share > 1 ? (int)share : 1;
}

void pprt_cpu_list(const int *ids, int n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ids[j + 1] == ids[j] + 1) j++;
        char item[32];
        int k = j > i ? snprintf(item, sizeof item, "%s%d-%d", i ? "," : "", ids[i], ids[j])
                      : snprintf(item, sizeof item, "%s%d", i ? "," : "", ids[i]);
        if (k < 0 || len + (size_t)k + 4 >= cap) {
            if (len + 4 < cap) memcpy(buf + len, ",...", 5);
            return;
        }
        memcpy(buf + len, item, (size_t)k + 1);
        len += (size_t)k;
        i = j + 1;
    }
}

/* The resident set's high-water mark of this process's own memory: Linux's
 * VmHWM. getrusage's ru_maxrss is not it: Linux carries it across exec from
 * the process that forked, so a pprt started by a Python holding PyTorch
 * reported that Python's half a gigabyte. getrusage only where /proc is not. */
size_t pprt_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kb = 0;
        bool found = false;
        while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "VmHWM: %llu kB", &kb) == 1;
        fclose(f);
        if (found) return (size_t)kb * 1024;
    }
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss * 1024 : 0; /* KiB */
}

double pprt_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
