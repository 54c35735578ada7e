/* A CPU-bound guest for measuring styx-qemu (`cargo xtask bench-qemu`):
 * a prime sieve, an insertion sort and a checksum, repeated ROUNDS times
 * (argv[1]); a few system calls in all (start-up, one line of output).
 * With `wait` (argv[2]) it first says "waiting" and reads a line from
 * stdin, so that a tracer can attach (`--pid`) before the work starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIEVE 100000
#define SORT 2000

static unsigned char composite[SIEVE];
static unsigned int values[SORT];

static unsigned long sieve(void) {
    unsigned long primes = 0;
    for (unsigned long i = 0; i < SIEVE; i++)
        composite[i] = 0;
    for (unsigned long i = 2; i < SIEVE; i++) {
        if (composite[i])
            continue;
        primes++;
        for (unsigned long j = i * i; j < SIEVE; j += i)
            composite[j] = 1;
    }
    return primes;
}

static unsigned long sort(unsigned int seed) {
    for (int i = 0; i < SORT; i++) {
        seed = seed * 1103515245u + 12345u;
        values[i] = seed >> 8;
    }
    for (int i = 1; i < SORT; i++) {
        unsigned int v = values[i];
        int j = i - 1;
        while (j >= 0 && values[j] > v) {
            values[j + 1] = values[j];
            j--;
        }
        values[j + 1] = v;
    }
    unsigned long sum = 0;
    for (int i = 0; i < SORT; i++)
        sum = sum * 31 + values[i];
    return sum;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    unsigned long total = 0;
    if (argc > 2 && strcmp(argv[2], "wait") == 0) {
        char line[16];
        printf("waiting\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
            return 1;
    }
    for (long r = 0; r < rounds; r++)
        total += sieve() + sort((unsigned int)r);
    printf("%lu\n", total);
    return 0;
}
