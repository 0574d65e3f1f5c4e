/* rng.h: the unit tests' seeded random numbers: uni() uniform in [0, 1)
 * (xorshift64, 53 bits), gauss() N(0, 1) (Box-Muller). Each test file sets
 * rng_state to its own seed, so a failure repeats. */
#ifndef PP_TEST_RNG_H
#define PP_TEST_RNG_H

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double uni(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double gauss(void) { /* Box-Muller */
    const double u = uni() + 1e-300, v = uni();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

#endif
