/* test_tactics.c: the convolution tactic cache's plain-C half (runtime/cuda/
 * tactics.h), no GPU needed.
 *   test_tactics            signatures (every field of a convolution moves
 *                           its signature; fused, strict apart), a table
 *                           line written and read back, malformed tables
 *                           refused naming the line, and every table built
 *                           into pprt parsed and named as a GPU's;
 *   test_tactics --sigs PLAN  one line per convolution step of each stage:
 *                           the node's name, a tab, its signature (tactics.sh
 *                           compares the splits of one model). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_steps.h"
#include "runtime/cuda/tactics.h"

static int failures;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL line %d: ", __LINE__);                                                               \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

static pcu_conv base_conv(void) {
    pcu_conv c = {.nsp = 2, .groups = 1, .act = 1, .has_bias = 1, .has_res = 1, .x = {8, 64, 56, 56},
                  .w = {64, 64, 3, 3}, .y = {8, 64, 56, 56}, .pre = {1, 1}, .post = {1, 1}, .stride = {1, 1},
                  .dil = {1, 1}, .lo = 0, .hi = 6};
    return c;
}

static void sig(const pcu_conv *c, bool fused, bool strict, char *buf) {
    CHECK(pcu_conv_signature(c, fused, strict, buf, PCU_TACTIC_SIG), "a signature does not fit");
}

/* Each field changed alone gives another signature (fused, so the epilogue counts) */
static void signatures(void) {
    const pcu_conv b = base_conv();
    char s0[PCU_TACTIC_SIG], s1[PCU_TACTIC_SIG];
    sig(&b, true, true, s0);
    pcu_conv c = b;
    sig(&c, true, true, s1);
    CHECK(!strcmp(s0, s1), "the same convolution, two signatures: %s | %s", s0, s1);
    /* every int64 of the dims, pads, strides and dilations that a 2-D convolution reads */
    static const size_t wide[] = {offsetof(pcu_conv, x), offsetof(pcu_conv, w), offsetof(pcu_conv, y),
                                  offsetof(pcu_conv, pre), offsetof(pcu_conv, post), offsetof(pcu_conv, stride),
                                  offsetof(pcu_conv, dil)};
    for (size_t f = 0; f < sizeof wide / sizeof *wide; f++)
        for (int k = 0; k < (f < 3 ? 4 : 2); k++) {
            c = b;
            ((int64_t *)((char *)&c + wide[f]))[k] += 1;
            sig(&c, true, true, s1);
            CHECK(strcmp(s0, s1), "field at %zu [%d] changed, the signature did not: %s", wide[f], k, s1);
        }
    static const size_t narrow[] = {offsetof(pcu_conv, nsp), offsetof(pcu_conv, transpose), offsetof(pcu_conv, groups), offsetof(pcu_conv, act),
                                    offsetof(pcu_conv, has_bias), offsetof(pcu_conv, has_res), offsetof(pcu_conv, wgrad),
                                    offsetof(pcu_conv, dt), offsetof(pcu_conv, nhwc)};
    for (size_t f = 0; f < sizeof narrow / sizeof *narrow; f++) {
        c = b;
        *(int32_t *)((char *)&c + narrow[f]) ^= 2;
        sig(&c, true, true, s1);
        CHECK(strcmp(s0, s1), "field at %zu changed, the signature did not: %s", narrow[f], s1);
    }
    pcu_conv d = b;
    d.act = 2;
    sig(&d, true, true, s0);
    d.hi = 5;
    sig(&d, true, true, s1);
    CHECK(strcmp(s0, s1), "a Clip bound changed, the signature did not: %s", s1);
    sig(&b, true, true, s0);
    sig(&b, false, true, s1);
    CHECK(strcmp(s0, s1), "fused and alone share a signature: %s", s1);
    sig(&b, false, false, s0);
    CHECK(strcmp(s0, s1), "strict and fast share a signature: %s", s0);
    /* alone, the epilogue is not the graph's: it does not count */
    d = b;
    d.has_bias = 0, d.act = 0, d.has_res = 0;
    sig(&d, false, true, s0);
    CHECK(!strcmp(s0, s1), "alone, the epilogue moved the signature: %s | %s", s0, s1);
    CHECK(!strchr(s1, '\t') && !strchr(s1, '\n'), "a signature holds a tab or newline: %s", s1);
    /* the layout (--cuda-layout): channels-last moves the signature, alone and fused; NCHW's stays as the tables
     * tuned before layouts wrote it */
    d = b;
    d.nhwc = 1;
    sig(&b, false, true, s0);
    sig(&d, false, true, s1);
    CHECK(strcmp(s0, s1) && strstr(s1, " nhwc") && !strstr(s0, "nhwc"), "NHWC and NCHW alone: %s | %s", s0, s1);
    sig(&b, true, false, s0);
    sig(&d, true, false, s1);
    CHECK(strcmp(s0, s1), "NHWC and NCHW fused share a signature: %s", s1);
    char tiny[8];
    CHECK(!pcu_conv_signature(&b, true, true, tiny, sizeof tiny), "a signature fit in 8 bytes");
}

static void lines(void) {
    pcu_tactic t = {.gidx = 17, .n_knobs = 3, .knob_type = {2, 14, 25}, .knob_value = {5, -1, 0},
                    .workspace = 1048576, .us = 12.25};
    const pcu_conv b = base_conv();
    sig(&b, false, true, t.sig);
    char line[1024], text[2 * 1024 + 16];
    CHECK(pcu_tactic_line(&t, line, sizeof line), "a line does not fit");
    pcu_tactic u = t;
    snprintf(u.sig, sizeof u.sig, "fwd another");
    u.n_knobs = 0;
    char line2[1024];
    CHECK(pcu_tactic_line(&u, line2, sizeof line2), "a line does not fit");
    snprintf(text, sizeof text, "# a comment\n%s\r\n%s", line, line2); /* CRLF, and no newline at the end */
    pcu_tactics tab;
    pp_err e = {0};
    CHECK(pcu_tactics_parse(text, strlen(text), "mem", &tab, &e) == PP_OK, "a good table refused: %s", e.msg);
    CHECK(tab.n == 2, "%d tactics read, want 2", tab.n);
    const pcu_tactic *r = pcu_tactics_find(&tab, t.sig);
    CHECK(r && r->gidx == 17 && r->n_knobs == 3 && r->knob_type[1] == 14 && r->knob_value[1] == -1 &&
              r->workspace == 1048576 && r->us == 12.25,
          "the tactic read back differs");
    r = pcu_tactics_find(&tab, "fwd another");
    CHECK(r && r->n_knobs == 0, "the knob-less tactic read back differs");
    CHECK(!pcu_tactics_find(&tab, "fwd missing"), "a missing signature found");
    pcu_tactics_free(&tab);
}

static void refused(void) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"# ok\nfwd a\t1\t-\t0\n", "line 2: it needs five fields"},
        {"fwd a\t1\t-\t0\t1\t9\n", "line 1: it needs five fields"},
        {"fwd a\tx\t-\t0\t1\n", "line 1: the engine is not"},
        {"fwd a\t-1\t-\t0\t1\n", "line 1: the engine is not"},
        {"fwd a\t1\t2\t0\t1\n", "line 1: the knobs are not"},
        {"fwd a\t1\t2:3,\t0\t1\n", "line 1: the knobs are not"},
        {"fwd a\t1\t-\t-5\t1\n", "line 1: the workspace is not"},
        {"fwd a\t1\t-\t0\tfast\n", "line 1: the time is not"},
        {"\t1\t-\t0\t1\n", "line 1: the signature is empty"},
        {"fwd a\t1\t-\t0\t1\nfwd a\t2\t-\t0\t1\n", "'fwd a' is there twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pcu_tactics tab;
        pp_err e = {0};
        const pp_status s = pcu_tactics_parse(bad[i].text, strlen(bad[i].text), "bad.tsv", &tab, &e);
        CHECK(s == PP_EINVAL && strstr(e.msg, bad[i].want) && strstr(e.msg, "bad.tsv"),
              "bad table %zu: status %d, message '%s', want '%s'", i, (int)s, e.msg, bad[i].want);
    }
}

static void builtin(void) {
    const int n = pcu_tactics_builtin_count();
    for (int i = 0; i < n; i++) {
        const char *text;
        size_t len;
        const char *name = pcu_tactics_builtin_at(i, &text, &len);
        pcu_tactics tab;
        pp_err e = {0};
        CHECK(pcu_tactics_parse(text, len, name, &tab, &e) == PP_OK, "built-in table %s: %s", name, e.msg);
        CHECK(strstr(name, "_cc") && strstr(name, "_cudnn"), "built-in table %s: not named <GPU>_cc.._cudnn..", name);
        size_t l2;
        CHECK(pcu_tactics_builtin(name, &l2) == text && l2 == len, "built-in table %s: not found by name", name);
        for (int k = 0; k < tab.n; k++)
            CHECK(!strncmp(tab.t[k].sig, "fwd ", 4) || !strncmp(tab.t[k].sig, "dgrad ", 6) ||
                      !strncmp(tab.t[k].sig, "wgrad ", 6),
                  "built-in table %s: '%s' is no convolution signature", name, tab.t[k].sig);
        pcu_tactics_free(&tab);
    }
    size_t l;
    CHECK(!pcu_tactics_builtin("no GPU_cc00_cudnn0", &l), "a table found for no GPU");
    printf("test_tactics: %d built-in tables\n", n);
}

/* (strict as the executor has it at --precision f32: a half plan's convolution takes tensor cores, exec_cuda.c
 * dnn_strict, and test_dnn --tune tunes it so) */
static void print_sig(const pcu_conv *c, const char *node, void *ctx) {
    char b[PCU_TACTIC_SIG];
    bool *ok = ctx;
    if (!pcu_conv_signature(c, false, c->dt != PCU_T_F16 && c->dt != PCU_T_BF16, b, sizeof b)) *ok = false;
    else printf("%s\t%s\n", node, b);
}

static int sigs(const char *path) {
    bool ok = true;
    return pcu_each_conv(path, "test_tactics", print_sig, &ok) != 0 || !ok;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--sigs")) return sigs(argv[2]);
    signatures();
    lines();
    refused();
    builtin();
    printf("test_tactics: %d failures\n", failures);
    return failures ? 1 : 0;
}
