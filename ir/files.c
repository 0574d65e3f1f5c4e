/* files.c: how both tools open files. Inputs are opened so that nothing can
 * make the open or a read wait forever (a FIFO, a terminal, a device), and
 * are refused unless they are regular files; outputs are written under a
 * temporary name and renamed into place, and the temporary names are kept in
 * a registry that a signal handler can read, so an interrupted tool leaves no
 * half-written file behind (pp_signals_install, called by the tools' mains). */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- opening inputs ------------------------------------------------------------ */

const char *pp_file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "a special file";
    }
}

static pp_status not_regular(const char *path, const char *what, unsigned mode, pp_err *err) {
    return PP_FAIL(err, PP_EIO, "%s%s'%s' is not a regular file (it is %s); refused", what ? what : "",
                   what ? " " : "", path, pp_file_kind(mode));
}

pp_status pp_open_read(const char *path, const char *what, int oflags, int *fd_out, struct stat *st_out,
                       pp_err *err) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO (no writer) or a device must not wait; the
     * flag is cleared again once the file is known to be a regular file */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | oflags);
    if (fd < 0) {
        int e = errno;
        struct stat sb;
        if ((e == ENXIO || e == EOPNOTSUPP) && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
            return not_regular(path, what, (unsigned)sb.st_mode, err); /* a socket */
        return PP_FAIL(err, PP_EIO, "cannot open %s%s'%s': %s", what ? what : "", what ? " " : "", path,
                       strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return PP_FAIL(err, PP_EIO, "cannot read %s%s'%s': %s", what ? what : "", what ? " " : "", path,
                       strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return not_regular(path, what, (unsigned)sb.st_mode, err);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return PP_FAIL(err, PP_EIO, "cannot read %s%s'%s': %s", what ? what : "", what ? " " : "", path,
                       strerror(e));
    }
    if (st_out) *st_out = sb;
    *fd_out = fd;
    return PP_OK;
}

pp_status pp_fopen_read(const char *path, const char *what, FILE **out, pp_err *err) {
    *out = NULL;
    int fd;
    PP_TRY(pp_open_read(path, what, 0, &fd, NULL, err));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return PP_FAIL(err, PP_EIO, "cannot read %s%s'%s': %s", what ? what : "", what ? " " : "", path,
                       strerror(e));
    }
    *out = f;
    return PP_OK;
}

/* ---- temporary files, and signals ----------------------------------------------- */

/* A slot's state: free, being filled (not yet a file), or armed (the signal
 * handler unlinks its path). The paths are static so that the handler reads
 * no memory that another thread could free. */
enum { SLOT_FREE, SLOT_CLAIMED, SLOT_ARMED };
#define TMP_SLOTS 32
static struct {
    atomic_int state;
    char path[PATH_MAX];
} tmp_slots[TMP_SLOTS];

static void on_signal(int sig) {
    /* async-signal-safe: atomic loads, unlink, _exit */
    for (int k = 0; k < TMP_SLOTS; k++)
        if (atomic_load(&tmp_slots[k].state) == SLOT_ARMED) unlink(tmp_slots[k].path);
    _exit(128 + sig);
}

void pp_signals_install(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++) {
        struct sigaction old;
        if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue; /* nohup, & */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigfillset(&sa.sa_mask);
        sigaction(sigs[k], &sa, NULL);
    }
}

int pp_tmp_files_armed(void) {
    int n = 0;
    for (int k = 0; k < TMP_SLOTS; k++) n += atomic_load(&tmp_slots[k].state) == SLOT_ARMED;
    return n;
}

/* A free slot holding "path.tmp.XXXXXX", armed, or -1. */
static int tmp_claim(const char *path) {
    for (int k = 0; k < TMP_SLOTS; k++) {
        int want = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&tmp_slots[k].state, &want, SLOT_CLAIMED)) continue;
        int n = snprintf(tmp_slots[k].path, sizeof tmp_slots[k].path, "%s.tmp.XXXXXX", path);
        if (n < 0 || (size_t)n >= sizeof tmp_slots[k].path) {
            atomic_store(&tmp_slots[k].state, SLOT_FREE);
            errno = ENAMETOOLONG;
            return -1;
        }
        /* armed before mkstemp creates the file: a signal in between finds
         * the template or the final name, never a file it does not know */
        atomic_store(&tmp_slots[k].state, SLOT_ARMED);
        return k;
    }
    errno = EMFILE;
    return -1;
}

static void tmp_release(int k) {
    if (k >= 0) atomic_store(&tmp_slots[k].state, SLOT_FREE);
}

/* ---- files written whole or not at all ------------------------------------------ */

pp_status pp_outpath_folder_check(const char *path, pp_err *err) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    if (len == 0) return PP_FAIL(err, PP_EINVAL, "an output path is empty");
    char dir[PATH_MAX];
    size_t cut = len;
    while (cut > 0 && path[cut - 1] != '/') cut--;
    while (cut > 1 && path[cut - 1] == '/') cut--; /* "a//b" -> "a" */
    if (cut == 0) snprintf(dir, sizeof dir, ".");
    else if (cut >= sizeof dir) return PP_FAIL(err, PP_EINVAL, "cannot create '%s': the path is too long", path);
    else snprintf(dir, sizeof dir, "%.*s", (int)cut, path);
    struct stat st;
    if (stat(dir, &st) != 0)
        return PP_FAIL(err, PP_EIO, "cannot create '%s': folder '%s' %s", path, dir,
                       errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return PP_FAIL(err, PP_EIO, "cannot create '%s': '%s' is %s, not a folder", path, dir,
                       pp_file_kind((unsigned)st.st_mode));
    if (access(dir, W_OK | X_OK) != 0)
        return PP_FAIL(err, PP_EIO, "cannot create '%s': no permission to create files in folder '%s'", path, dir);
    return PP_OK;
}

pp_status pp_outfile_check(const char *path, bool stream_ok, pp_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) return pp_outpath_folder_check(path, err);
    if (S_ISREG(st.st_mode)) return pp_outpath_folder_check(path, err); /* replaced by a rename */
    if (S_ISCHR(st.st_mode)) return PP_OK;
    if (S_ISFIFO(st.st_mode) && stream_ok) return PP_OK;
    if (S_ISFIFO(st.st_mode))
        return PP_FAIL(err, PP_EIO, "cannot write '%s': it is a FIFO, and this file is written with seeks "
                       "(give a regular file, or /dev/null)", path);
    return PP_FAIL(err, PP_EIO, "cannot write '%s': it is %s (outputs go to regular files, character "
                   "devices such as /dev/null, or FIFOs that a process reads)", path,
                   pp_file_kind((unsigned)st.st_mode));
}

pp_status pp_outfile_open(pp_outfile *o, const char *path, pp_err *err) {
    o->f = NULL;
    o->tmp = NULL;
    o->path = path;
    o->special = false;
    o->fifo = false;
    o->slot = -1;
    struct stat st;
    const bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return PP_FAIL(err, PP_EIO, "cannot write '%s': it is a directory", path);
    if (exists && !S_ISREG(st.st_mode)) {
        PP_TRY(pp_outfile_check(path, true, err));
        /* written in place. O_NONBLOCK: a FIFO that no process reads fails
         * (ENXIO) instead of waiting for a reader forever */
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ENXIO && S_ISFIFO(st.st_mode))
            return PP_FAIL(err, PP_EIO, "cannot write '%s': it is a FIFO that no process reads (refused: "
                           "writing it would wait forever)", path);
        if (fd < 0) return PP_FAIL(err, PP_EIO, "cannot write '%s': %s", path, strerror(errno));
        struct stat fs;
        int fl = fcntl(fd, F_GETFL);
        if (fstat(fd, &fs) != 0 || !(S_ISCHR(fs.st_mode) || S_ISFIFO(fs.st_mode)) || fl < 0 ||
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || !(o->f = fdopen(fd, "wb"))) {
            close(fd);
            return PP_FAIL(err, PP_EIO, "cannot write '%s': it is not a regular file, a character device or "
                           "a FIFO", path);
        }
        o->special = true;
        o->fifo = S_ISFIFO(fs.st_mode);
        return PP_OK;
    }
    int k = tmp_claim(path);
    if (k < 0) return PP_FAIL(err, PP_EIO, "cannot create a temporary file beside '%s': %s", path, strerror(errno));
    o->slot = k;
    o->tmp = tmp_slots[k].path;
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        /* the user's path, not the temporary name beside it */
        const int e = errno;
        pp_status s = e == ENOENT || e == ENOTDIR || e == EACCES ? pp_outpath_folder_check(path, err) : PP_OK;
        if (s == PP_OK) s = PP_FAIL(err, PP_EIO, "cannot create '%s': %s", path, strerror(e));
        tmp_release(k);
        o->tmp = NULL;
        o->slot = -1;
        return s;
    }
    (void)fchmod(fd, 0644);
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        pp_status s = PP_FAIL(err, PP_EIO, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        tmp_release(k);
        o->tmp = NULL;
        o->slot = -1;
        return s;
    }
    return PP_OK;
}

pp_status pp_outfile_commit(pp_outfile *o, bool ok, pp_err *err) {
    if (!o->f) return PP_FAIL(err, PP_EIO, "'%s' was not opened", o->path);
    ok = ok && !ferror(o->f) && fflush(o->f) == 0 && (o->special || fsync(fileno(o->f)) == 0);
    int saved = errno;
    ok = fclose(o->f) == 0 && ok;
    o->f = NULL;
    pp_status s = PP_OK;
    if (!ok) {
        s = PP_FAIL(err, PP_EIO, "cannot write '%s': %s", o->path, strerror(saved ? saved : EIO));
        if (!o->special) unlink(o->tmp);
    } else if (!o->special && rename(o->tmp, o->path) != 0) {
        s = PP_FAIL(err, PP_EIO, "cannot write '%s' (the rename into place failed): %s", o->path, strerror(errno));
        unlink(o->tmp);
    }
    /* released after the rename: a signal in between unlinks a name that no
     * longer exists, and the output is whole under its final name */
    tmp_release(o->slot);
    o->slot = -1;
    o->tmp = NULL;
    return s;
}

/* ---- tensor names as data file names ------------------------------------------- */

pp_status pp_data_name_check(const char *name, const char *what, pp_err *err) {
    size_t len = strlen(name);
    if (len <= PP_DATA_NAME_MAX) return PP_OK;
    return PP_FAIL(err, PP_EINVAL, "%s '%.48s...' has a %zu-byte name, too long for its data file: pprt reads and "
                   "writes NAME.npy (NAME.npy.tmp.XXXXXX while writing), which allows at most %d bytes of name "
                   "under the file system's %d-byte limit; rename it in the model", what, name, len,
                   PP_DATA_NAME_MAX, NAME_MAX);
}
