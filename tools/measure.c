/* measure.c: ppcc --measure. A roofline prices every op at one compute rate
 * and one memory bandwidth; real kernels do not run so (oneDNN's dense
 * convolutions at 100-150 GFLOP/s a core, depthwise ones at about 25,
 * docs/partitioning.md), and a split balanced on the roofline can leave one
 * stage 10-20% longer than the other. A profile of the model (pprt
 * --profile) fixes that; this does by itself what a user would do by hand:
 * lower the graph as one stage, run it with pprt on random inputs at the
 * micro-batch and the threads per stage the split will run with, and take
 * the profile's node times into the cost model.
 *
 * ppcc links no runtime (no oneDNN, no CUDA): pprt runs as a child process,
 * and its messages go where ppcc's go. */
#define _GNU_SOURCE
#include "measure.h"

#include <errno.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../ir/json.h"
#include "../runtime/io.h"
#include "../runtime/pprt.h"

extern char **environ;

#define MAX_ARGS 64
#define MAX_PROCS 64 /* pprt processes side by side */

/* $PPCC_PPRT, else the pprt in this executable's directory, else "pprt"
 * (looked up on PATH). */
static void find_pprt(char *buf, size_t n) {
    const char *e = getenv("PPCC_PPRT");
    if (e && *e) {
        snprintf(buf, n, "%s", e);
        return;
    }
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            const int k2 = snprintf(buf, n, "%s/pprt", self);
            if (k2 > 0 && (size_t)k2 < n && access(buf, X_OK) == 0) return;
        }
    }
    snprintf(buf, n, "pprt");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* xorshift64*: the same inputs on every run */
static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* Values that keep every kernel on its ordinary path: floats in (-1, 1)
 * (no denormals, no NaN), integers and booleans 0 (a valid index for any
 * Gather, an empty mask). */
static void fill(void *data, pp_dtype dt, size_t count, uint64_t *seed) {
    for (size_t i = 0; i < count; i++) {
        const uint64_t r = next_rand(seed);
        const float f = (float)((double)(r >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
        if (dt == PP_F32) {
            ((float *)data)[i] = f;
        } else if (dt == PP_F64) {
            ((double *)data)[i] = f;
        } else if (dt == PP_BF16) {
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)data)[i] = (uint16_t)(u >> 16);
        } else if (dt == PP_F16) { /* +-[0.5, 1): exponent 14, a random mantissa */
            ((uint16_t *)data)[i] = (uint16_t)(((r >> 63) << 15) | (14u << 10) | ((r >> 20) & 0x3ff));
        }
    }
}

/* One NAME.npy per graph input: `runs` micro-batches of the graph's
 * micro-batch (one whole tensor when the graph has no batch axis). */
static pp_status write_inputs(const pp_graph *g, const char *dir, int runs, pp_err *err) {
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < g->n_inputs; i++) {
        const pp_value *v = &g->values[g->inputs[i]];
        pp_shape sh = v->shape;
        if (g->batch > 0 && sh.rank > 0) sh.dim[0] *= runs;
        size_t nbytes;
        PP_TRY(pp_shape_nbytes(&sh, v->dtype, &nbytes, err));
        const size_t esize = pp_dtype_size(v->dtype);
        void *data = calloc(1, nbytes ? nbytes : 1);
        if (!data) return PP_FAIL(err, PP_ENOMEM, "--measure: out of memory for %zu bytes of input '%s'", nbytes, v->name);
        fill(data, v->dtype, esize ? nbytes / esize : 0, &seed);
        char safe[PP_FILE_NAME_MAX], path[4096];
        pp_file_name(v->name, safe, sizeof safe);
        if ((size_t)snprintf(path, sizeof path, "%s/%s.npy", dir, safe) >= sizeof path) {
            free(data);
            return PP_FAIL(err, PP_EIO, "--measure: the temporary directory's name is too long (%s)", dir);
        }
        pp_status s = pprt_npy_write(path, v->dtype, &sh, data, err);
        free(data);
        PP_TRY(s);
    }
    return PP_OK;
}

/* ---- signals ----
 * ppcc's handler (pp_signals_install) removes temporary files and exits; it
 * cannot remove a directory tree. While the measuring directory exists,
 * SIGINT, SIGTERM and SIGHUP are blocked: one that comes while pprt runs is
 * passed on to pprt (which stops), the directory is removed, and then the
 * signal is raised again for ppcc's handler. */
static sigset_t saved_mask;
static bool blocked;
static int caught; /* a signal taken from the pending set while pprt ran */

static void signals_block(void) {
    if (blocked) return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT), sigaddset(&set, SIGTERM), sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, &saved_mask);
    blocked = true;
}

static void signals_restore(void) {
    if (!blocked) return;
    blocked = false;
    sigprocmask(SIG_SETMASK, &saved_mask, NULL); /* a pending one is delivered here */
    if (caught) raise(caught);
}

static int signal_pending(void) {
    sigset_t p;
    if (caught) return caught;
    if (sigpending(&p) != 0) return 0;
    return sigismember(&p, SIGINT) ? SIGINT : sigismember(&p, SIGTERM) ? SIGTERM : sigismember(&p, SIGHUP) ? SIGHUP : 0;
}

/* Run n copies of pprt side by side, copy k with argv[k] and, where sets is
 * given, on the CPUs of sets[k] (ppcc's own affinity while it starts the
 * child, which inherits it; pprt pins its threads inside it), all with the
 * signal mask ppcc had before blocking; PP_OK when every one exits 0. A
 * signal is passed on to every copy still running. */
enum { KILL_TICKS = 60 }; /* 3 s after a signal passed on, the copies left are killed */

static pp_status run_children(char ***argv, const cpu_set_t *sets, int n, pp_err *err) {
    pid_t pid[MAX_PROCS];
    int st[MAX_PROCS], live = 0;
    bool done[MAX_PROCS] = {false};
    cpu_set_t mine;
    const bool pin = sets && sched_getaffinity(0, sizeof mine, &mine) == 0;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &saved_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int e = 0;
    for (int k = 0; k < n && !e; k++) {
        if (pin) sched_setaffinity(0, sizeof sets[k], &sets[k]);
        e = strchr(argv[k][0], '/') ? posix_spawn(&pid[k], argv[k][0], NULL, &attr, argv[k], environ)
                                    : posix_spawnp(&pid[k], argv[k][0], NULL, &attr, argv[k], environ);
        if (!e) live++;
    }
    if (pin) sched_setaffinity(0, sizeof mine, &mine);
    posix_spawnattr_destroy(&attr);
    if (e) { /* stop the ones started, then say why */
        for (int k = 0; k < live; k++) kill(pid[k], SIGTERM), waitpid(pid[k], &st[k], 0);
        return PP_FAIL(err, PP_EIO, "--measure: cannot run pprt '%s': %s (set PPCC_PPRT to pprt's path)", argv[0][0],
                       strerror(e));
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT), sigaddset(&set, SIGTERM), sigaddset(&set, SIGHUP);
    int ticks_since = -1; /* 50 ms ticks since a signal was passed on */
    while (live > 0) {
        for (int k = 0; k < n; k++) {
            if (done[k]) continue;
            const pid_t w = waitpid(pid[k], &st[k], WNOHANG);
            if (w == pid[k]) done[k] = true, live--;
            else if (w < 0 && errno != EINTR) done[k] = true, live--, st[k] = -1;
        }
        if (!live) break;
        const struct timespec tick = {0, 50 * 1000 * 1000};
        const int sig = sigtimedwait(&set, NULL, &tick);
        if (sig > 0) {
            for (int k = 0; k < n; k++)
                if (!done[k]) kill(pid[k], sig);
            if (!caught) ticks_since = 0;
            caught = sig;
        } else if (ticks_since >= 0 && ++ticks_since == KILL_TICKS) {
            /* pprt exits at once on these signals, but a copy that was still
             * starting may have missed it (or a stand-in may treat it as it
             * likes): an interrupted ppcc must not wait for its whole run */
            for (int k = 0; k < n; k++)
                if (!done[k]) kill(pid[k], SIGKILL);
        }
    }
    if (caught)
        return PP_FAIL(err, PP_ERUNTIME, "--measure: interrupted (signal %d) while pprt profiled the model", caught);
    for (int k = 0; k < n; k++) {
        if (st[k] != -1 && WIFEXITED(st[k]) && WEXITSTATUS(st[k]) == 0) continue;
        char cmd[1024];
        size_t c = 0;
        for (int i = 0; argv[k][i] && c + 1 < sizeof cmd; i++)
            c += (size_t)snprintf(cmd + c, sizeof cmd - c, "%s%s", i ? " " : "", argv[k][i]);
        /* pprt's exit 2 is bad input (an op its backend refuses, say): ppcc's
         * too; anything else failed while running */
        if (st[k] == -1) return PP_FAIL(err, PP_EIO, "--measure: waiting for pprt: %s", strerror(errno));
        if (WIFEXITED(st[k]))
            return PP_FAIL(err, WEXITSTATUS(st[k]) == 2 ? PP_EINVAL : PP_ERUNTIME, "--measure: pprt exited with "
                           "status %d while profiling the model as one stage (its messages are above; the command "
                           "was: %s)", WEXITSTATUS(st[k]), cmd);
        return PP_FAIL(err, PP_ERUNTIME, "--measure: pprt was killed by signal %d while profiling the model as one "
                       "stage (the command was: %s)", WTERMSIG(st[k]), cmd);
    }
    return PP_OK;
}

/* A profile times one kind of device, and the cost model takes a node's
 * measured time wherever the node goes: stages placed on different backends
 * cannot be priced from one profile. */
static pp_status check_places(const pp_compile_opts *co, int stages, pp_err *err) {
    const int s = pp_stage_other_backend(co, stages);
    if (!s) return PP_OK;
    const char *b0 = pp_stage_place(co, 0).backend, *bs = pp_stage_place(co, s).backend;
    return PP_FAIL(err, PP_EINVAL, "--measure times one kind of device, and --placement puts stage 0 on %s and stage "
                   "%d on %s: a profile of either would misprice the other (leave out --measure, or place every "
                   "stage on one backend)", b0[0] ? b0 : "pprt's default", s, bs[0] ? bs : "pprt's default");
}

/* The nodes' times (their mean over `procs` copies) as a profile file like
 * pprt's, for --search, which reads profiles by path: the micro-batch and
 * device of the first copy's file, the device marked as measured so. */
static pp_status write_mean(const pp_graph *g, const char *first, int procs, const char *path, pp_err *err) {
    int64_t batch = 0;
    char device[256];
    PP_TRY(pp_profile_header(first, &batch, device, sizeof device, err));
    char dev[400];
    snprintf(dev, sizeof dev, "%s, %d side by side", device, procs);
    pp_json j;
    cJSON *nodes = pp_json_profile_begin(&j, batch, dev);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].prof_s >= 0) pp_json_add_round(&j, nodes, g->nodes[i].name, g->nodes[i].prof_s * 1e3, 6);
    return pp_json_write(&j, path, false, err);
}

/* Profile g (front passes done, not split) as one stage into prof, using
 * dir for the plan, the inputs and the outputs (made as needed). */
/* g as one stage, over the model's own weights, on the backend its stages
 * will run on (check_places refused two), written to `plan`; *one: the
 * options it was compiled with. */
static pp_status write_one_stage(pp_graph *g, const pp_compile_opts *co, const ppcc_measure_opts *m, const char *plan,
                                 pp_compile_opts *one_out, pp_err *err) {
    pp_compile_opts one = *co;
    one.n_stages = 1;
    one.n_split_at = 0;
    one.exec_seq = NULL;
    one.cap_all = 0;
    one.n_caps = 0;
    one.n_profiles = 0;
    one.policy = PP_POLICY_AUTO;
    one.replicas = 1;
    one.dump_ir = NULL;
    one.dump_dot = NULL;
    one.quiet = true;
    one.search = one.max_batch = false;
    one.place_all = pp_stage_place(co, 0);
    for (int k = 0; k <= PP_MAX_SPLITS; k++) one.place[k] = (pp_place){.device = -1}, one.stage_set[k] = 0;
    PP_TRY(pp_run_split_passes(g, &one, err));
    pp_lowered low = {0};
    pp_status s = pp_lower(g, m->options, "ppcc " PPRT_VERSION " --measure", m->model, &low, err);
    if (s == PP_OK) s = pp_plan_write(&low, plan, err);
    pp_lowered_free(&low);
    pp_unsplit(g);
    *one_out = one;
    return s;
}

/* Each node's mean over the copies' profiles (paths[k][0]), into the nodes
 * and (more than one copy) into prof; *matched: the nodes timed. */
static pp_status mean_profiles(pp_graph *g, const char (*paths)[2][4200], int procs, const char *prof, int *matched,
                               pp_err *err) {
    pp_status s = PP_OK;
    double *sum = calloc((size_t)g->n_nodes + 1, sizeof *sum);
    int *cnt = calloc((size_t)g->n_nodes + 1, sizeof *cnt);
    if (!sum || !cnt) s = PP_FAIL(err, PP_ENOMEM, "out of memory");
    for (int k = 0; k < procs && s == PP_OK; k++) {
        for (int i = 0; i < g->n_nodes; i++) g->nodes[i].prof_s = -1;
        int mk = 0;
        s = pp_apply_profile(g, paths[k][0], &mk, err);
        for (int i = 0; i < g->n_nodes && s == PP_OK; i++)
            if (g->nodes[i].prof_s >= 0) sum[i] += g->nodes[i].prof_s, cnt[i]++;
    }
    *matched = 0;
    for (int i = 0; i < g->n_nodes && s == PP_OK; i++) {
        g->nodes[i].prof_s = cnt[i] ? sum[i] / cnt[i] : -1;
        *matched += cnt[i] > 0;
    }
    if (s == PP_OK && procs > 1) s = write_mean(g, paths[0][0], procs, prof, err);
    free(sum), free(cnt);
    return s;
}

/* Whether backend `name` runs its stages on a device (ir/base.h's rows);
 * false for NULL or a host backend. */
static bool on_device(const char *name) {
    const pp_backend_kind *k = name && *name ? pp_backend_kind_of(name) : NULL;
    return k && k->device;
}

/* The backend that --measure-args names ("--backend B" or "--backend=B"),
 * in a static buffer; NULL when none does. */
static const char *backend_arg(const char *args) {
    static char name[64];
    for (const char *p = args ? strstr(args, "--backend") : NULL; p; p = strstr(p + 9, "--backend")) {
        const char *v = p + 9;
        if (*v != ' ' && *v != '=') continue;
        v += strspn(v, " =");
        const size_t len = strcspn(v, " ");
        if (len == 0 || len >= sizeof name) continue;
        memcpy(name, v, len);
        name[len] = 0;
        return name;
    }
    return NULL;
}

static pp_status profile_into(pp_graph *g, const pp_compile_opts *co, const ppcc_measure_opts *m, int stages,
                              const char *dir, const char *prof, int *matched, pp_err *err) {
    char plan[4096], data[4096], out[4096], pprt[4096], tbuf[16];
    pp_status s = PP_OK;
    snprintf(plan, sizeof plan, "%s/one.plan", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    if (mkdir(data, 0700) != 0 && errno != EEXIST) return PP_FAIL(err, PP_EIO, "--measure: %s: %s", data, strerror(errno));

    pp_compile_opts one;
    PP_TRY(write_one_stage(g, co, m, plan, &one, err));
    PP_TRY(write_inputs(g, data, m->runs, err));

    /* Copies side by side, each on its own cores with a stage's threads, as
     * many as stages will share this host's cores, so that each is timed with
     * the others busy as the stages will be (cores share the memory bandwidth
     * and the last-level cache); one where the stages run on a GPU. */
    const bool gpu = on_device(one.place_all.backend) || on_device(backend_arg(m->args));
    /* the cores this process may use (its affinity mask), at least 1 */
    cpu_set_t mine;
    const bool have_mask = sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_COUNT(&mine) > 0;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int cores = have_mask ? CPU_COUNT(&mine) : online > 0 ? (int)online : 1;
    int procs = m->procs > 0 ? m->procs : gpu ? 1 : stages < cores ? stages : cores;
    if (procs > MAX_PROCS) procs = MAX_PROCS;
    const int threads = cores / stages > 1 ? cores / stages : 1;

    /* pprt ONE.plan DATA -o OUT -q --warmup 1 --profile PROF [--threads T] ARGS... */
    char *args = m->args ? strdup(m->args) : NULL;
    char **argv = calloc((size_t)procs * (MAX_ARGS + 16), sizeof *argv), ***argvs = calloc((size_t)procs, sizeof *argvs);
    char(*paths)[2][4200] = calloc((size_t)procs, sizeof *paths);
    cpu_set_t *sets = calloc((size_t)procs, sizeof *sets);
    if ((m->args && !args) || !argv || !argvs || !paths || !sets) {
        free(args), free(argv), free(argvs), free(paths), free(sets);
        return PP_FAIL(err, PP_ENOMEM, "out of memory");
    }
    find_pprt(pprt, sizeof pprt);
    bool own_threads = false;
    int n_extra = 0;
    char *extra[MAX_ARGS];
    for (char *save = NULL, *t = args ? strtok_r(args, " \t", &save) : NULL; t && s == PP_OK;
         t = strtok_r(NULL, " \t", &save)) {
        if (n_extra == MAX_ARGS) s = PP_FAIL(err, PP_EINVAL, "--measure-args: more than %d arguments", MAX_ARGS);
        else own_threads = own_threads || !strcmp(t, "--threads"), extra[n_extra++] = t;
    }
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    for (int k = 0; k < procs; k++) {
        char **v = argvs[k] = argv + (size_t)k * (MAX_ARGS + 16);
        if (procs == 1) snprintf(paths[k][0], sizeof paths[k][0], "%s", prof);
        else snprintf(paths[k][0], sizeof paths[k][0], "%s.%d", prof, k);
        snprintf(paths[k][1], sizeof paths[k][1], "%s%d", out, k);
        int n = 0;
        v[n++] = pprt, v[n++] = plan, v[n++] = data, v[n++] = "-o", v[n++] = paths[k][1], v[n++] = "-q";
        v[n++] = "--warmup", v[n++] = "1", v[n++] = "--profile", v[n++] = paths[k][0];
        if (!own_threads) v[n++] = "--threads", v[n++] = tbuf;
        for (int j = 0; j < n_extra; j++) v[n++] = extra[j];
        v[n] = NULL;
    }
    /* copy k on allowed CPUs k*threads .. (k+1)*threads - 1 (counted in the mask), where they go round */
    const bool pin = have_mask && procs > 1 && !own_threads && cores >= procs * threads;
    for (int k = 0; pin && k < procs; k++) CPU_ZERO(&sets[k]);
    for (int c = 0, j = 0; pin && c < CPU_SETSIZE && j < procs * threads; c++)
        if (CPU_ISSET(c, &mine)) CPU_SET(c, &sets[j++ / threads]);
    if (!m->quiet && s == PP_OK) {
        if (g->batch > 0)
            fprintf(stderr, "ppcc: --measure: profiling the model as one stage with pprt: %d micro-batch%s of %lld "
                    "after 1 untimed", m->runs, m->runs == 1 ? "" : "es", (long long)g->batch);
        else /* no batch axis: the inputs are whole tensors, one run */
            fprintf(stderr, "ppcc: --measure: profiling the model as one stage with pprt: one run after 1 untimed");
        if (procs > 1) fprintf(stderr, ", %d copies side by side%s", procs, pin ? " on their own cores" : "");
        if (!own_threads)
            fprintf(stderr, ", %d thread%s%s (%d core%s / %d %s)", threads, threads == 1 ? "" : "s",
                    procs > 1 ? " each" : "", cores, cores == 1 ? "" : "s", stages,
                    co->search ? (stages == 1 ? "device" : "devices") : (stages == 1 ? "stage" : "stages"));
        if (m->args) fprintf(stderr, ", pprt %s", m->args);
        fprintf(stderr, "\n");
    }
    fflush(stderr);
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (s == PP_OK) s = run_children(argvs, pin ? sets : NULL, procs, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *matched = 0;
    if (s == PP_OK) s = mean_profiles(g, (const char(*)[2][4200])paths, procs, prof, matched, err);
    free(args), free(argv), free(argvs), free(paths), free(sets);
    PP_TRY(s);
    const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!m->quiet)
        fprintf(stderr, "ppcc: --measure: pprt timed %d of %d ops in %.1f s%s\n", *matched, g->n_nodes, secs,
                *matched < g->n_nodes ? "; the others use the roofline estimate" : "");
    return PP_OK;
}

/* An --exec-seq file's stages: one more than its SPLIT_NODE entries (the
 * split may merge a cut that lands on no op; this is for the thread count
 * only). 1 when the file cannot be read (the split will say why). */
static int exec_seq_stages(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    int n = 1, c, k = 0;
    static const char word[] = "SPLIT_NODE";
    while ((c = fgetc(f)) != EOF) {
        k = c == word[k] ? k + 1 : c == word[0] ? 1 : 0;
        if (k == (int)sizeof word - 1) n++, k = 0;
    }
    fclose(f);
    return n;
}

static pp_status make_dir(char *dir, size_t n, pp_err *err) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, n, "%s/ppcc-measure-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return PP_FAIL(err, PP_EIO, "--measure: cannot make a directory like %s: %s", dir, strerror(errno));
    return PP_OK;
}

pp_status ppcc_measure(pp_graph *g, const pp_compile_opts *co, const ppcc_measure_opts *m, pp_err *err) {
    char dir[4096], prof[4200];
    signals_block();
    pp_status s = make_dir(dir, sizeof dir, err);
    if (s != PP_OK) {
        signals_restore();
        return s;
    }
    snprintf(prof, sizeof prof, "%s/profile.json", dir);
    /* a custom split's cuts give the stages (-pp keeps its default then) */
    const int stages = co->n_split_at > 0 ? co->n_split_at + 1
                       : co->exec_seq     ? exec_seq_stages(co->exec_seq)
                       : co->n_stages > 0 ? co->n_stages
                                          : 1;
    int matched = 0;
    s = check_places(co, stages, err);
    if (s == PP_OK) s = profile_into(g, co, m, stages, dir, prof, &matched, err);
    rm_tree(dir);
    signals_restore();
    return s;
}

pp_status ppcc_measure_search(pp_compile_opts *co, pp_import_fn imp, void *ctx, const ppcc_measure_opts *m,
                              ppcc_measured *out, pp_err *err) {
    memset(out, 0, sizeof *out);
    int64_t b[PP_MAX_BATCH_SIZES];
    const int nb = pp_search_batch_sizes(co, b);
    if (nb > PP_MAX_PROFILES)
        return PP_FAIL(err, PP_EINVAL, "--measure: at most %d micro-batch sizes (--batch-sizes has %d)", PP_MAX_PROFILES,
                       nb);
    signals_block(); /* until ppcc_measured_free */
    pp_status s = make_dir(out->dir, sizeof out->dir, err);
    if (s != PP_OK) {
        out->dir[0] = 0;
        signals_restore();
        return s;
    }
    pp_compile_opts fo = *co;
    fo.n_profiles = 0;
    fo.dump_ir = NULL;
    fo.dump_dot = NULL;
    s = check_places(co, co->devices > 0 ? co->devices : 1, err);
    for (int k = 0; k < nb && s == PP_OK; k++) {
        snprintf(out->paths[k], sizeof out->paths[k], "%s/profile_%lld.json", out->dir, (long long)b[k]);
        pp_graph g;
        s = imp(ctx, b[k], &g, err);
        if (s != PP_OK) break;
        s = pp_run_front_passes(&g, &fo, err);
        int matched = 0;
        if (s == PP_OK) s = profile_into(&g, &fo, m, co->devices > 0 ? co->devices : 1, out->dir, out->paths[k],
                                         &matched, err);
        pp_graph_free(&g);
        if (s == PP_OK) co->profiles[out->n++] = out->paths[k];
    }
    co->n_profiles = out->n;
    if (s != PP_OK) ppcc_measured_free(out, co);
    return s;
}

pp_status ppcc_measured_check(pp_err *err) {
    const int sig = signal_pending();
    return sig ? PP_FAIL(err, PP_ERUNTIME, "interrupted (signal %d)", sig) : PP_OK;
}

void ppcc_measured_free(ppcc_measured *m, pp_compile_opts *co) {
    if (m->dir[0]) rm_tree(m->dir);
    m->dir[0] = 0;
    if (co) co->n_profiles = 0;
    m->n = 0;
    signals_restore();
}
