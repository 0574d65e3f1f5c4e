/* check.h: the checks every unit test file uses. CHECK(cond, fmt, ...)
 * counts a check and, when cond is false, prints where, the condition and
 * the message, and counts a failure; check_summary(name) prints the tally
 * and gives main's return value (1 after any failure). */
#ifndef PP_TEST_CHECK_H
#define PP_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int check_count, check_failures;

__attribute__((format(printf, 4, 5))) static void check_failed(const char *file, int line, const char *cond,
                                                                const char *fmt, ...) {
    check_failures++;
    fprintf(stderr, "%s:%d: CHECK(%s) failed: ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

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
