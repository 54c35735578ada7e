/* Tail calls for function tracing (--functions), built with -O2 so that
 * GCC ends a function with a `jmp` to the one it calls last:
 *
 *   tail   jumps to callee (both traced in the tests)
 *   stub   jumps to work (work is not traced), as a wrapper that only
 *          passes its arguments on does
 *   outer  calls stub, then returns
 *
 * `styx-loader list --functions` checks each jump is there. Runs N rounds
 * (argv[1]) of tail(i) and outer(i), then prints "done N". */
#include <stdio.h>
#include <stdlib.h>

volatile int sink;

__attribute__((noinline, noipa)) int callee(int x) {
    sink += x;
    return x * 2;
}

__attribute__((noinline, noipa)) int tail(int x) {
    sink ^= x;
    return callee(x + 1);
}

__attribute__((noinline, noipa)) int work(int x) {
    for (int i = 0; i < 100; i++)
        sink += i;
    return x + 3;
}

__attribute__((noinline, noipa)) int stub(int x) {
    return work(x * 5);
}

__attribute__((noinline, noipa)) int outer(int x) {
    int r = stub(x);
    sink += r;
    return r + 1;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < rounds; i++) {
        tail(i);
        outer(i);
    }
    printf("done %d\n", rounds);
    return 0;
}
