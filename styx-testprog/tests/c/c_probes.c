/* Every styx event type fired through styx_probe.h, ROUNDS rounds with
 * values the test knows (argv[1]). Compiled as C11 and as C++17, against
 * the static library and (STYX_PROBE_SHARED) the shared one. Prints
 * "ready", waits for a line on stdin (or its end), fires, then says how
 * often a probe's argument was evaluated: only while traced. */
#include <stdio.h>
#include <stdlib.h>
#include "styx_probe.h"

static unsigned evaluated;

static uint64_t counted(uint64_t value) {
    evaluated++;
    return value;
}

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) {
        line[0] = 0;
    }
    for (unsigned i = 0; i < rounds; i++) {
        uint64_t pc = 0x1000 + i;
        STYX_INSN_FETCH(pc, 0xa9, 2);
        STYX_INSN_EXEC(pc, 0xa9, 2);
        STYX_BLOCK(pc, 12);
        STYX_MEM_READ(pc, 0x2000 + i, counted(i), 1);
        STYX_MEM_WRITE(pc, 0x3000 + i, 0x1234 + i, 2);
        STYX_REG_READ(pc, 3, i);
        STYX_REG_WRITE(pc, 4, i + 1, i);
        STYX_BRANCH(pc, 0x4000, STYX_BRANCH_CALL | (i % 2 ? STYX_BRANCH_CONDITIONAL : 0));
        STYX_INTERRUPT(i % 2 ? STYX_INTERRUPT_EXIT : STYX_INTERRUPT_ENTRY, 7, pc, 0xfe00);
        STYX_CONTROL(1, i, 2);
        if (STYX_ENABLED(span_begin)) {
            uint64_t id = styx_next_span_id();
            STYX_SPAN_BEGIN("cpu", "frame", id);
            STYX_SPAN_END("cpu", "frame", id);
        }
        STYX_MARKER("round");
    }
    styx_flush();
    printf("evaluated %u\n", evaluated);
    return 0;
}
