/* args.h: what both tools' mains share in reading argv: GNU "--name=value"
 * (split where an option is read, so every option takes both forms, the
 * backends' own too), and the "did you mean" of an unknown option. */
#pragma once

#include <stdbool.h>

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
