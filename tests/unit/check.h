/* check.h: the checks every unit test file uses. CHECK(cond, fmt, ...)
 * counts a check and, when cond is false, prints where, the case
 * (check_case), the condition and the message, and counts a failure;
 * CHECK_FAIL(fmt, ...) reports a failure found otherwise; check_summary(name)
 * prints the tally and gives main's return value (1 after any failure). */
#ifndef PP_TEST_CHECK_H
#define PP_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int check_count, check_failures;
/* What the checks are about now (a test case's name), printed with each
 * failure; "" for nothing. */
static const char *check_case = "";

__attribute__((format(printf, 4, 5))) static void check_failed(const char *file, int line, const char *cond,
                                                                const char *fmt, ...) {
    check_failures++;
    fprintf(stderr, "%s:%d: %s%s%sCHECK(%s) failed: ", file, line, *check_case ? "[" : "", check_case,
            *check_case ? "] " : "", cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* A failure found without a CHECK (a helper comparing arrays, say). */
#define CHECK_FAIL(...) check_failed(__FILE__, __LINE__, "", __VA_ARGS__)

#define CHECK(c, ...)                                                      \
    do {                                                                   \
        check_count++;                                                     \
        if (!(c)) check_failed(__FILE__, __LINE__, #c, __VA_ARGS__);       \
    } while (0)

static int check_summary(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, check_count);
    return 0;
}

#endif
