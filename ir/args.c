/* args.c: argv as both tools read it (args.h). */
#include "args.h"

#include "base.h"

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
        const int d = pp_edit_distance(bad, len, names[k]);
        if (d < bd) best = names[k], bd = d, tie = false;
        else if (d == bd && best && strcmp(best, names[k])) tie = true;
    }
    return tie ? NULL : best;
}
