/* optim.c: see optim.h. */
#include "optim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void pp_optim_init(pp_optim *o) {
    memset(o, 0, sizeof *o);
    o->kind = PP_OPTIM_SGD;
    o->lr = 0.01;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->scale_growth = PP_LOSS_SCALE_GROWTH;
    o->scale_backoff = PP_LOSS_SCALE_BACKOFF;
    o->scale_interval = PP_LOSS_SCALE_GROWTH_STEPS;
}

const char *pp_precision_name(int precision) {
    static const char *const names[] = {"f32", "bf16", "fp16"};
    return precision >= 0 && precision < 3 ? names[precision] : "?";
}

/* A static scale, or dynamic's first: positive and an f32 (the seed is one). */
#define SCALE_LO 1e-30
#define SCALE_HI 3.4e38

static pp_status set_given(void *base, const char *name, const char *v, pp_err *err);

static pp_status set_loss_scale(void *base, const char *name, const char *v, pp_err *err) {
    pp_optim *o = base;
    const bool dyn = !strncmp(v, "dynamic", 7) && (v[7] == 0 || v[7] == ':');
    const char *num = dyn ? (v[7] ? v + 8 : NULL) : v;
    double x = PP_LOSS_SCALE_DYNAMIC_INIT;
    if (num) {
        char *end;
        errno = 0;
        x = strtod(num, &end);
        if (errno || end == num || *end || !(x >= SCALE_LO && x <= SCALE_HI))
            return PP_FAIL(err, PP_EINVAL, "%s needs a scale 1e-30..3.4e38, dynamic or dynamic:S, got '%s'", name, v);
    }
    o->loss_scale = x;
    o->dynamic_scale = dyn;
    return set_given(base, name, v, err);
}

/* --loss-scale in the plan's options line: the scale, or dynamic[:S] (S where it is not the default) */
static void text_loss_scale(const void *base, bool agree, pp_opt_out *t) {
    const pp_optim *o = base;
    char b[40];
    if (!o->loss_scale && !agree) return;
    if (!o->dynamic_scale) pp_opt_add(t, " --loss-scale %s", o->loss_scale ? pp_opt_num(o->loss_scale, b, sizeof b) : "none");
    else if (o->loss_scale == PP_LOSS_SCALE_DYNAMIC_INIT) pp_opt_add(t, " --loss-scale dynamic");
    else pp_opt_add(t, " --loss-scale dynamic:%s", pp_opt_num(o->loss_scale, b, sizeof b));
}

#define F(field) offsetof(pp_optim, field)
#define R (PP_OPT_RECORD)
/* columns (pp_opt, ir/args.h): names, kind, value in --help, field, lo, hi, words, what a value must
 * be, default, help, PP_OPT_* flags, main order, --help section, setter, text */
static const pp_opt rows[] = {
    {"--optimizer", PP_OPT_WORD, "O", F(kind), 0, 0, "sgd|adamw", NULL, "sgd",
     "sgd (with --momentum, --nesterov) or adamw (decoupled weight decay), PyTorch's arithmetic", R, 0,
     "the optimizer (ppcc --train records it in the plan; given to pprt, it overrides the plan's)", set_given, NULL},
    {"--lr", PP_OPT_NUM, "X", F(lr), 0, 1e6, NULL, "a rate 0..1e6", "0.01", "learning rate", R, 0, NULL, set_given,
     NULL},
    {"--momentum", PP_OPT_NUM, "X", F(momentum), 0, 1, NULL, "a number in 0..1", "0", "SGD's momentum", R, 0, NULL,
     set_given, NULL},
    {"--nesterov", PP_OPT_FLAG, NULL, F(nesterov), 0, 0, NULL, NULL, NULL, "SGD with Nesterov momentum", R, 0, NULL,
     set_given, NULL},
    {"--weight-decay", PP_OPT_NUM, "X", F(weight_decay), 0, 1e6, NULL, "a number 0..1e6", "0",
     "L2 added to SGD's gradient; AdamW's decoupled decay", R, 0, NULL, set_given, NULL},
    {"--beta1", PP_OPT_NUM, "X", F(beta1), 0, 0.999999, NULL, "a number in 0..0.999999", "0.9",
     "AdamW's first-moment decay", R, 0, NULL, set_given, NULL},
    {"--beta2", PP_OPT_NUM, "X", F(beta2), 0, 0.999999999, NULL, "a number in 0..0.999999999", "0.999",
     "AdamW's second-moment decay", R, 0, NULL, set_given, NULL},
    {"--eps", PP_OPT_NUM, "X", F(eps), 0, 1, NULL, "a number in 0..1", "1e-8", "AdamW's epsilon", R, 0, NULL,
     set_given, NULL},
    {"--clip-norm", PP_OPT_NUM, "X", F(clip_norm), 0, 1e30, NULL, "a number 0..1e30", "0 (none)",
     "scale each step's gradients to this global L2 norm when it is over", R, 0, NULL, set_given, NULL},
    {"--lr-schedule", PP_OPT_WORD, "S", F(schedule), 0, 0, "constant|cosine", NULL, "constant",
     "cosine: from --lr down to --lr-min over the steps after the warm-up", R, 0, NULL, set_given, NULL},
    {"--warmup-steps", PP_OPT_I64, "N", F(warmup_steps), 0, 1000000000, NULL, "a count 0..1e9", "0",
     "linear warm-up of the learning rate over the first N steps", R, 0, NULL, set_given, NULL},
    {"--lr-min", PP_OPT_NUM, "X", F(lr_min), 0, 1e6, NULL, "a rate 0..1e6", "0", "where the cosine schedule ends", R,
     0, NULL, set_given, NULL},
    {"--loss-scale", PP_OPT_CUSTOM, "S", PP_OPT_NOFIELD, 0, 0, NULL, "a scale 1e-30..3.4e38, dynamic or dynamic:S",
     "none", "multiply the loss gradient by S (a power of two leaves the trained weights' bits as they are) and "
     "divide the gradients by it before clipping and the optimizer; dynamic: PyTorch GradScaler's rule from 65536 "
     "(dynamic:S from S): a step with an infinite or NaN gradient is skipped and the scale halved, the scale "
     "doubled after 2000 clean steps (the next three options change the rule)", R, 0, NULL, set_loss_scale,
     text_loss_scale},
    {"--loss-scale-growth", PP_OPT_NUM, "X", F(scale_growth), 1, 65536, NULL, "a factor 1..65536", "2",
     "--loss-scale dynamic: the factor the scale grows by after --loss-scale-interval clean steps (GradScaler's "
     "growth_factor)", R, 0, NULL, set_given, NULL},
    {"--loss-scale-backoff", PP_OPT_NUM, "X", F(scale_backoff), 1e-6, 1, NULL, "a factor 1e-6..1", "0.5",
     "--loss-scale dynamic: the factor an overflow multiplies the scale by (GradScaler's backoff_factor)", R, 0,
     NULL, set_given, NULL},
    {"--loss-scale-interval", PP_OPT_I64, "N", F(scale_interval), 1, 1000000000, NULL, "a count 1..1e9", "2000",
     "--loss-scale dynamic: clean steps in a row before the scale grows (GradScaler's growth_interval)", R, 0, NULL,
     set_given, NULL},
};
#undef F
#undef R

#define N_ROWS ((int)(sizeof rows / sizeof *rows))

const pp_opt *pp_optim_table(int *n) {
    *n = N_ROWS;
    return rows;
}

/* Whether `name` is one of the row's spellings ("-a|--bee"). */
static bool row_named(const pp_opt *r, const char *name) {
    const size_t ln = strlen(name);
    for (const char *s = r->names; *s;) {
        const size_t k = strcspn(s, "|");
        if (k == ln && !strncmp(s, name, k)) return true;
        s += k + (s[k] == '|');
    }
    return false;
}

static pp_status set_given(void *base, const char *name, const char *v, pp_err *err) {
    (void)v, (void)err;
    for (int k = 0; k < N_ROWS; k++)
        if (row_named(&rows[k], name)) ((pp_optim *)base)->given |= 1u << k;
    return PP_OK;
}

/* Row r's value in o as the command line would write it. */
static void value_text(const pp_opt *r, const pp_optim *o, char *buf, size_t cap) {
    const char *f = (const char *)o + r->off;
    char t[40];
    if (r->off == PP_OPT_NOFIELD) { /* --loss-scale */
        pp_opt_out out = {buf, cap, 0};
        buf[0] = 0;
        text_loss_scale(o, true, &out);
        const char *sp = strchr(buf, ' ') ? strchr(buf + 1, ' ') : NULL;
        if (sp) memmove(buf, sp + 1, strlen(sp));
        return;
    }
    switch (r->kind) {
    case PP_OPT_FLAG: snprintf(buf, cap, "%s", *(const bool *)f ? "on" : "off"); return;
    case PP_OPT_I64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)f); return;
    case PP_OPT_NUM: snprintf(buf, cap, "%s", pp_opt_num(*(const double *)f, t, sizeof t)); return;
    case PP_OPT_WORD: {
        const char *w = r->words;
        for (int k = 0; k < *(const int *)f && *w; k++) w += strcspn(w, "|") + (w[strcspn(w, "|")] == '|');
        snprintf(buf, cap, "%.*s", (int)strcspn(w, "|"), w);
        return;
    }
    default: buf[0] = 0; return;
    }
}

pp_status pp_optim_check(const pp_optim *o, const char *what, pp_err *err) {
    for (int k = 0; k < N_ROWS; k++) {
        const pp_opt *r = &rows[k];
        if (r->off == PP_OPT_NOFIELD) continue;
        const char *f = (const char *)o + r->off, *name = r->names + 2;
        char lo[40], hi[40];
        pp_opt_num(r->lo, lo, sizeof lo), pp_opt_num(r->hi, hi, sizeof hi);
        if (r->kind == PP_OPT_NUM && !(*(const double *)f >= r->lo && *(const double *)f <= r->hi))
            return PP_FAIL(err, PP_EINVAL, "%s: %s: expected %s..%s, got %g", what, name, lo, hi, *(const double *)f);
        if (r->kind == PP_OPT_I64 && !(*(const int64_t *)f >= r->lo && *(const int64_t *)f <= r->hi))
            return PP_FAIL(err, PP_EINVAL, "%s: %s: expected %s..%s, got %lld", what, name, lo, hi,
                           (long long)*(const int64_t *)f);
        if (r->kind == PP_OPT_WORD) {
            int nw = 1;
            for (const char *w = r->words; *w; w++) nw += *w == '|';
            const int x = *(const int *)f;
            if (x < 0 || x >= nw) return PP_FAIL(err, PP_EINVAL, "%s: %s: expected one of %s (0..%d), got %d", what,
                                                 name, r->words, nw - 1, x);
        }
    }
    if (o->precision < PP_PREC_F32 || o->precision > PP_PREC_FP16)
        return PP_FAIL(err, PP_EINVAL, "%s: precision: expected 0 (f32), 1 (bf16) or 2 (fp16), got %d", what,
                       o->precision);
    const double s = o->loss_scale;
    if (!(s == 0 || (s >= SCALE_LO && s <= SCALE_HI)) || (o->dynamic_scale && s == 0))
        return PP_FAIL(err, PP_EINVAL, "%s: loss-scale: expected 0 (none) or %g..%g%s, got %g", what, SCALE_LO,
                       SCALE_HI, o->dynamic_scale ? " (dynamic: not 0)" : "", s);
    return PP_OK;
}

int pp_optim_buffers(const pp_optim *o) {
    if (o->kind == PP_OPTIM_ADAMW) return 2;
    return o->momentum != 0 ? 1 : 0;
}

void pp_optim_describe(const pp_optim *o, char *buf, size_t cap) {
    char a[40], b[40], c[40];
    pp_opt_out t = {buf, cap, 0};
    buf[0] = 0;
    pp_opt_add(&t, "%s, lr %s", o->kind == PP_OPTIM_ADAMW ? "adamw" : "sgd", pp_opt_num(o->lr, a, sizeof a));
    if (o->kind == PP_OPTIM_ADAMW)
        pp_opt_add(&t, ", betas %s %s, eps %s", pp_opt_num(o->beta1, a, sizeof a), pp_opt_num(o->beta2, b, sizeof b),
                   pp_opt_num(o->eps, c, sizeof c));
    else if (o->momentum != 0)
        pp_opt_add(&t, ", momentum %s%s", pp_opt_num(o->momentum, a, sizeof a), o->nesterov ? " (Nesterov)" : "");
    if (o->weight_decay != 0) pp_opt_add(&t, ", weight decay %s", pp_opt_num(o->weight_decay, a, sizeof a));
    if (o->clip_norm > 0) pp_opt_add(&t, ", clip norm %s", pp_opt_num(o->clip_norm, a, sizeof a));
    if (o->warmup_steps > 0) pp_opt_add(&t, ", warm-up %lld steps", (long long)o->warmup_steps);
    if (o->schedule == PP_LR_COSINE) pp_opt_add(&t, ", cosine to %s", pp_opt_num(o->lr_min, a, sizeof a));
    if (o->loss_scale > 0)
        pp_opt_add(&t, ", loss scale %s%s", o->dynamic_scale ? "dynamic from " : "", pp_opt_num(o->loss_scale, a, sizeof a));
    if (o->loss_scale > 0 && o->dynamic_scale)
        pp_opt_add(&t, " (x%s after %lld clean steps, x%s on an overflow)", pp_opt_num(o->scale_growth, a, sizeof a),
                   (long long)o->scale_interval, pp_opt_num(o->scale_backoff, b, sizeof b));
    if (o->precision != PP_PREC_F32)
        pp_opt_add(&t, ", precision %s (f32 master weights and optimizer)", pp_precision_name(o->precision));
    pp_opt_add(&t, "; %d state buffer%s per weight", pp_optim_buffers(o), pp_optim_buffers(o) == 1 ? "" : "s");
}

void pp_optim_merge(pp_optim *o, const pp_optim *plan, const pp_optim *cli, FILE *note) {
    *o = *plan;
    char line[1024] = "";
    pp_opt_out t = {line, sizeof line, 0};
    for (int k = 0; k < N_ROWS; k++) {
        if (!(cli->given & (1u << k))) continue;
        const pp_opt *r = &rows[k];
        char was[64], now[64];
        value_text(r, plan, was, sizeof was);
        if (r->off == PP_OPT_NOFIELD) o->loss_scale = cli->loss_scale, o->dynamic_scale = cli->dynamic_scale;
        else memcpy((char *)o + r->off, (const char *)cli + r->off,
                    r->kind == PP_OPT_NUM ? sizeof(double) : r->kind == PP_OPT_I64 ? sizeof(int64_t)
                    : r->kind == PP_OPT_FLAG ? sizeof(bool) : sizeof(int));
        value_text(r, o, now, sizeof now);
        pp_opt_add(&t, "%s%.*s %s (the plan's: %s)", t.len ? ", " : "", (int)strcspn(r->names, "|"), r->names, now, was);
    }
    o->given = cli->given;
    if (note && t.len) fprintf(note, "pprt: note: the command line overrides the plan's optimizer: %s\n", line);
}
