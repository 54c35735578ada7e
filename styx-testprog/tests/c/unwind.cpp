// Function tracing through C++ exceptions: each round, thrower(3) recurses
// to thrower(0), which throws; main catches it, then calls leaf(). So per
// round: 4 calls of thrower that never return (they unwind) and one of leaf
// that does. Prints "caught N" at the end. An uretprobe on thrower would
// make the unwinder abort the program (std::terminate); styx's probes on
// the `ret` instructions leave the stack alone.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

__attribute__((noinline)) int thrower(int depth) {
    volatile char frame[32];
    frame[0] = static_cast<char>(depth);
    if (depth == 0) {
        throw std::runtime_error("bottom");
    }
    // Work after the call: no tail call.
    return thrower(depth - 1) + frame[0];
}

__attribute__((noinline)) int leaf(int n) {
    volatile int x = n;
    return x + 1;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 1;
    int caught = 0;
    for (int i = 0; i < rounds; i++) {
        try {
            thrower(3);
        } catch (const std::exception &) {
            caught++;
        }
        leaf(i);
    }
    std::printf("caught %d\n", caught);
    return 0;
}
