/* args.h: what both tools' mains share in reading argv: GNU "--name=value"
 * (split where an option is read, so every option takes both forms, the
 * backends' own too), the "did you mean" of an unknown option, and the
 * option tables each tool's command line is made of (a row per option). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base.h"

/* A copy of argv that pp_argv_at may grow (each split adds one entry). */
typedef struct pp_argv {
    int argc;
    char **argv;   /* argc entries and a NULL */
    bool *glued;   /* entry i came from after the '=' of "--name=value" */
    char **owned;  /* the split-off names, freed by pp_argv_free */
    int n_owned;
} pp_argv;

/* Copy argc/argv (room for every entry to be split once); false when out of
 * memory. */
bool pp_argv_init(pp_argv *a, int argc, char **argv);
void pp_argv_free(pp_argv *a);
/* Call where argv[i] is read as an option: "--name=value" becomes "--name"
 * and "value" (glued), unless "--name" is one of `keep` (NULL-terminated:
 * options whose value is optional and read glued, as --dump-ir=PASS). Returns
 * false when argv[i] is itself a glued value that the option before it did
 * not take (that option takes no value: the caller reports argv[i - 1]). */
bool pp_argv_at(pp_argv *a, int i, const char *const *keep);
/* The one name among names[0..n) closest to `bad` (an unknown option, any
 * "=value" left out): the only one it is a prefix of, else the nearest by
 * edit distance when that is at most a third of its length (at least 1, at
 * most 3) and no other is as near; NULL when none is. */
const char *pp_argv_suggest(const char *bad, const char *const *names, int n);

/* ---- option tables -------------------------------------------------------------------
 * One row per option; a tool's options are a few tables (its own, the
 * passes', ...) handed together to the parser, --help, "did you mean", the
 * plan's recorded options and the text MPI ranks compare. */
#include <stddef.h>
#include <stdio.h>

#include "base.h"

typedef enum pp_opt_kind {
    PP_OPT_FLAG, /* no value; sets a bool */
    PP_OPT_INT,  /* a whole number in [lo, hi] into an int */
    PP_OPT_I64,  /* a whole number in [lo, hi] into an int64_t */
    PP_OPT_NUM,  /* a number in [lo, hi] into a double */
    PP_OPT_STR,  /* any non-empty word (a path, a name) into a const char * */
    PP_OPT_WORD, /* one of `words` ("f32|bf16"): its index into an int */
    PP_OPT_PAIR, /* NAME=VALUE (both non-empty), repeatable: only `set` stores it */
    PP_OPT_CUSTOM, /* any value; only `set` reads it */
} pp_opt_kind;

enum {
    PP_OPT_RECORD = 1, /* in the plan's recorded options (ppcc) */
    PP_OPT_AGREE = 2,  /* every MPI rank must have the same value (pprt) */
    PP_OPT_ALWAYS = 4, /* recorded even at its default */
    PP_OPT_PATH = 8,   /* recorded as "(file)", compared as given/none: paths differ between machines */
    PP_OPT_OPTVAL = 16, /* the value is optional and only glued: --dump-ir[=PASS] */
};
#define PP_OPT_NOFIELD ((size_t)-1) /* a row whose `set` does all */

typedef struct pp_opt pp_opt;
/* The text an option adds to a recorded or agreed line (" --name value"). */
typedef struct pp_opt_out {
    char *buf;
    size_t cap, len;
} pp_opt_out;
void pp_opt_add(pp_opt_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct pp_opt {
    const char *names; /* "-o|--output": every spelling; the first is the one recorded */
    pp_opt_kind kind;
    const char *arg;   /* its value in --help ("N", "FILE"); NULL for a flag */
    size_t off;        /* of the field in the table's struct, or PP_OPT_NOFIELD */
    double lo, hi;     /* INT, I64, NUM: the range taken */
    const char *words; /* WORD: "a|b|c" */
    const char *what;  /* in "-b needs a batch size 0..2^20, got 'x'": "a batch size 0..2^20" */
    const char *dflt;  /* the default as --help says it, or NULL */
    const char *help;  /* one paragraph, wrapped by --help */
    unsigned flags;    /* PP_OPT_* */
    int main;          /* > 0: listed first in --help, in this order */
    const char *section; /* a heading printed in --help before this row */
    /* after the value is checked (and stored at off): more checks and
     * effects (other fields, a repeat, a list); v NULL for a flag. Fills err
     * (one line, naming the option) and fails on a bad value. */
    pp_status (*set)(void *base, const char *name, const char *v, pp_err *err);
    /* the option's text for the plan's options (agree false) or the MPI
     * ranks' comparison (agree true), where the kind's default does not fit */
    void (*text)(const void *base, bool agree, pp_opt_out *o);
};

typedef struct pp_opt_table {
    const pp_opt *rows;
    int n;
    void *base; /* the struct the rows' offsets and setters refer to */
} pp_opt_table;

/* The standard message for a bad value of `row`: "NAME needs WHAT, got 'V'". */
pp_status pp_opt_bad(const pp_opt *row, const char *name, const char *v, pp_err *err);
/* Read the option at a->argv[*i] (after pp_argv_at) against the tables: 1
 * taken (*i advanced past its value), 0 none of theirs, -1 bad (err filled). */
int pp_opts_take(pp_argv *a, int *i, const pp_opt_table *t, int nt, pp_err *err);
/* pp_argv_at for these tables (their PP_OPT_OPTVAL rows stay glued). */
bool pp_opts_split(pp_argv *a, int i, const pp_opt_table *t, int nt);
/* Every name of every row into names[0..cap); returns the count. */
int pp_opts_names(const pp_opt_table *t, int nt, const char **names, int cap);
/* The rows as --help lists them: the main ones first, then the others in
 * table order, each "  NAMES ARG   help (default X)" wrapped at 100 columns. */
void pp_opts_usage(FILE *f, const pp_opt_table *t, int nt);
/* The text of the rows with any of `flags` (PP_OPT_RECORD, PP_OPT_AGREE):
 * recorded: " NAME VALUE" where set (always with PP_OPT_ALWAYS); agreed:
 * every row, "NAME VALUE", paths as given/none, flags as yes/no. No leading
 * space. */
void pp_opts_text(const pp_opt_table *t, int nt, unsigned flags, char *buf, size_t cap);
/* x as the shortest text that reads back as x (15 digits, else 17). */
const char *pp_opt_num(double x, char *buf, size_t n);
