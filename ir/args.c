/* args.c: argv as both tools read it (args.h). */
#include "args.h"

#include <stdlib.h>
#include <string.h>

bool pp_argv_init(pp_argv *a, int argc, char **argv) {
    *a = (pp_argv){0};
    const int cap = 2 * argc + 1;
    a->argv = calloc((size_t)cap, sizeof *a->argv);
    a->glued = calloc((size_t)cap, sizeof *a->glued);
    a->owned = calloc((size_t)cap, sizeof *a->owned);
    if (!a->argv || !a->glued || !a->owned) {
        pp_argv_free(a);
        return false;
    }
    for (int k = 0; k < argc; k++) a->argv[k] = argv[k];
    a->argc = argc;
    return true;
}

void pp_argv_free(pp_argv *a) {
    for (int k = 0; a->owned && k < a->n_owned; k++) free(a->owned[k]);
    free(a->owned);
    free(a->argv);
    free(a->glued);
    *a = (pp_argv){0};
}

bool pp_argv_at(pp_argv *a, int i, const char *const *keep) {
    if (i <= 0 || i >= a->argc) return true;
    if (a->glued[i]) return false;
    char *s = a->argv[i];
    char *eq = strchr(s, '=');
    if (strncmp(s, "--", 2) || !eq || eq == s + 2) return true;
    for (int k = 0; keep && keep[k]; k++)
        if (strlen(keep[k]) == (size_t)(eq - s) && !strncmp(s, keep[k], (size_t)(eq - s))) return true;
    char *name = malloc((size_t)(eq - s) + 1);
    if (!name) return true; /* left whole: reported as an unknown option */
    memcpy(name, s, (size_t)(eq - s));
    name[eq - s] = 0;
    a->owned[a->n_owned++] = name;
    memmove(a->argv + i + 2, a->argv + i + 1, (size_t)(a->argc - i) * sizeof *a->argv); /* with the NULL */
    memmove(a->glued + i + 2, a->glued + i + 1, (size_t)(a->argc - i - 1) * sizeof *a->glued);
    a->argv[i] = name;
    a->argv[i + 1] = eq + 1;
    a->glued[i + 1] = true;
    a->argc++;
    return true;
}

/* Levenshtein distance, capped at 64 characters a side. */
static int distance(const char *s, size_t ls, const char *t) {
    size_t lt = strlen(t);
    if (ls > 64 || lt > 64) return 1000;
    int row[65];
    for (size_t j = 0; j <= lt; j++) row[j] = (int)j;
    for (size_t i = 1; i <= ls; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lt; j++) {
            const int up = row[j];
            int best = diag + (s[i - 1] != t[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lt];
}

const char *pp_argv_suggest(const char *bad, const char *const *names, int n) {
    const char *eq = strchr(bad, '=');
    const size_t len = eq ? (size_t)(eq - bad) : strlen(bad);
    const char *pre = NULL;
    int n_pre = 0;
    for (int k = 0; len > 2 && k < n; k++)
        if (strlen(names[k]) > len && !strncmp(names[k], bad, len) && (!pre || strcmp(pre, names[k])))
            pre = names[k], n_pre++;
    if (n_pre == 1) return pre;
    int limit = (int)len / 3;
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    const char *best = NULL;
    int bd = limit + 1;
    bool tie = false;
    for (int k = 0; k < n; k++) {
        const int d = distance(bad, len, names[k]);
        if (d < bd) best = names[k], bd = d, tie = false;
        else if (d == bd && best && strcmp(best, names[k])) tie = true;
    }
    return tie ? NULL : best;
}
