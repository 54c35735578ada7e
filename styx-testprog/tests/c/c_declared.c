/* Event types declared in c_declared.styx (styx-declare made the header
 * the test includes as "c_declared_styx.h"), fired ROUNDS rounds with
 * values the test knows (argv[1]), beside register writes the guest
 * description names. Compiled as C11 and as C++17. Prints "ready", waits
 * for a line on stdin (or its end), fires, then says how often a
 * probe's argument was evaluated: only while traced. */
#include <stdio.h>
#include <stdlib.h>
#include "styx_probe.h"
#define STYX_DECLARE_DEFINITIONS
#include "c_declared_styx.h"

static unsigned evaluated;

static uint64_t counted(uint64_t value) {
    evaluated++;
    return value;
}

static const uint8_t devices[3] = {EMU_DEVICE_UART, EMU_DEVICE_TIMER, EMU_DEVICE_DMA};

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) {
        line[0] = 0;
    }
    for (unsigned i = 0; i < rounds; i++) {
        int64_t s = (int64_t)i;
        STYX_FIRE(emu_mmio_write, (uint32_t)counted(0x1000 + i), devices[i % 3], 0x10 + i, 3 * i);
        STYX_FIRE(emu_flags_delta, (uint16_t)(0x600 + i), (int8_t)-(s % 5), -1000 * s, i % 2 == 1,
                  (uint8_t)(i % 3));
        STYX_FIRE(emu_eight, (uint8_t)(250 + i), (uint16_t)(0xfff0 + i), 0xfffffff0u + i,
                  0xfffffffffffffff0ull + i, (int16_t)(-300 - s), (int32_t)(-70000 - s),
                  (uint8_t)i, (uint64_t)1 << 63);
        STYX_FIRE(emu_tick);
        /* af (0) and a (1, its bits 8..16): named by the description, in
         * Tenet as af alone. */
        STYX_REG_WRITE(0x1000 + i, 0, 0x1200 + i, 0x1100 + i);
        STYX_REG_WRITE(0x1000 + i, 1, 0x40 + i, 0x12);
    }
    styx_flush();
    printf("evaluated %u\n", evaluated);
    return 0;
}
