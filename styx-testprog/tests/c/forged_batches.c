/* A hostile emulator: it has styx-probe's batch flush site and a
 * batch-enable site, written by hand (the same `.note.stapsdt` layout and
 * semaphore block styx-probe emits), and hands over batches that no honest
 * styx-probe makes: batch numbers going backwards, a number reused with other
 * contents, made-up thread ids, a thread registry with slots that point at
 * garbage. The layouts mirror styx_common::batch; the test passes their
 * constants (-DLAYOUT_VERSION=… and the rest) from the Rust definitions.
 *
 * Reads commands on stdin and answers each with one line:
 *   backwards BATCHES EVENTS  one buffer's batches, numbered BATCHES-1 down to 0
 *   conflict EVENTS           one batch number twice, other contents the second time
 *   repeat EVENTS             one batch handed over twice, the same bytes
 *   reused-tid EVENTS         two buffers of one thread, the second's number lower
 *   tids N FROM               N one-event batches, each naming another made-up
 *                             thread id (FROM, FROM+1, … above 0x40000000)
 *   registry EVENTS           a registry whose slots hold garbage, an unmapped
 *                             address, a buffer twice, a gap, and two buffers
 *                             with EVENTS pending (read when the loader stops)
 *   quit
 * Forging commands answer `forged events=N`; `registry` answers
 * `registered events=N`: the events the loader should deliver. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#if !defined(LAYOUT_VERSION) || !defined(REGISTRY_SLOTS) || !defined(BATCH_BYTES) || \
    !defined(BATCH_MAGIC) || !defined(INSN_EXEC) || !defined(KIND_SLOTS) || \
    !defined(INSN_EXEC_TAG) || !defined(TIME_TAG)
#error "build with the layout constants from styx_common::batch and ::item (see the e2e test)"
#endif

/* styx_common::batch::BatchHead. */
struct head {
    uint32_t magic;
    uint32_t tid;
    uint64_t seq;
    uint32_t len;
    uint32_t cap;
    uint64_t taken_seq;
    uint32_t taken_len;
    uint32_t buffer;
    uint32_t counts[KIND_SLOTS];
};
_Static_assert(sizeof(struct head) == 104, "BatchHead is 104 bytes");

struct buffer {
    struct head head;
    uint8_t items[BATCH_BYTES];
};

/* The registry's first block: slots, then the next block (null). */
static struct buffer *registry_slots[REGISTRY_SLOTS + 1];

/* styx_common::batch::FlushSemaphore. */
struct flush_block {
    uint16_t listeners;
    uint16_t layout_version;
    uint32_t reserved;
    struct buffer **registry;
    uint64_t flushed;
    uint64_t credit;
    uint32_t credit_owner;
    uint32_t controlled;
};
_Static_assert(sizeof(struct flush_block) == 40, "FlushSemaphore is 40 bytes");

/* On a page of their own, as styx-probe places its semaphores. */
struct flush_block forged_flush_block __attribute__((section(".probes"), aligned(4096))) = {
    .layout_version = LAYOUT_VERSION,
    .registry = registry_slots,
};
/* insn_exec's semaphore word: per-event half, then the batched half. */
uint32_t forged_insn_exec_semaphore __attribute__((section(".probes"), aligned(4)));

/* A stapsdt note for the site at local label 990. */
#define NOTE(provider, name, semaphore, spec)                                     \
    ".pushsection .note.stapsdt, \"\", \"note\"\n"                                \
    ".balign 4\n"                                                                 \
    ".4byte 992f-991f, 994f-993f, 3\n"                                            \
    "991: .asciz \"stapsdt\"\n"                                                   \
    "992: .balign 4\n"                                                            \
    "993: .8byte 990b\n"                                                          \
    ".8byte _.stapsdt.base\n"                                                     \
    ".8byte " semaphore "\n"                                                      \
    ".asciz \"" provider "\"\n"                                                   \
    ".asciz \"" name "\"\n"                                                       \
    ".asciz \"" spec "\"\n"                                                       \
    "994: .balign 4\n"                                                            \
    ".popsection\n"                                                               \
    ".ifndef _.stapsdt.base\n"                                                    \
    ".pushsection .stapsdt.base, \"aGR\", \"progbits\", .stapsdt.base, comdat\n"  \
    ".weak _.stapsdt.base\n"                                                      \
    ".hidden _.stapsdt.base\n"                                                    \
    "_.stapsdt.base:\n"                                                           \
    ".space 1\n"                                                                  \
    ".size _.stapsdt.base, 1\n"                                                   \
    ".popsection\n"                                                               \
    ".endif\n"

/* styx_batch:flush(head, start, len, seq, tid, layout), as styx-probe
 * fires it; without `layout` before layout 4. */
__attribute__((noinline)) static void fire_flush(uint64_t head, uint64_t start, uint64_t len,
                                                 uint64_t seq, uint64_t tid) {
    register uint64_t r8 __asm__("r8") = tid;
#if LAYOUT_VERSION >= 4
    register uint64_t r9 __asm__("r9") = LAYOUT_VERSION;
    __asm__ __volatile__("990: nop\n" NOTE("styx_batch", "flush", "forged_flush_block",
                                           "8@%%rdi 8@%%rsi 8@%%rdx 8@%%rcx 8@%%r8 8@%%r9")
                         :
                         : "D"(head), "S"(start), "d"(len), "c"(seq), "r"(r8), "r"(r9)
                         : "memory");
#else
    __asm__ __volatile__("990: nop\n" NOTE("styx_batch", "flush", "forged_flush_block",
                                           "8@%%rdi 8@%%rsi 8@%%rdx 8@%%rcx 8@%%r8")
                         :
                         : "D"(head), "S"(start), "d"(len), "c"(seq), "r"(r8)
                         : "memory");
#endif
}

/* styx_batch:insn_exec: never runs; attaching to it raises the batched
 * half. And a styx:insn_exec site on the word, as every program that fires
 * insn_exec has: a loader takes batch-enable sites only of kinds it has. */
__attribute__((noinline, used)) static void batch_enable_site(void) {
    __asm__ __volatile__("jmp 995f\n"
                         "990: nop\n" NOTE("styx_batch", "insn_exec",
                                           "forged_insn_exec_semaphore+2", "")
                         "995:\n");
    __asm__ __volatile__("jmp 995f\n"
                         "990: nop\n" NOTE("styx", "insn_exec",
                                           "forged_insn_exec_semaphore", "8@%rdi 8@%rsi 8@%rdx")
                         "995:\n");
}

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint32_t my_tid(void) { return (uint32_t)syscall(SYS_gettid); }

static struct buffer buffers[3];

/* Writes the low `bytes` bytes of `value` at item offset `at` of `b`
 * (little-endian, as x86 is); the offset after them. */
static size_t put(struct buffer *b, size_t at, uint64_t value, size_t bytes) {
    memcpy(&b->items[at], &value, bytes);
    return at + bytes;
}

/* Fills `b` as batch `seq` of thread `tid`: a time mark, then `events`
 * insn_exec items whose pcs start at `first_pc`. */
static void fill(struct buffer *b, uint32_t id, uint32_t tid, uint64_t seq, uint64_t first_pc,
                 int events) {
    memset(&b->head, 0, sizeof b->head);
    b->head.magic = BATCH_MAGIC;
    b->head.tid = tid;
    b->head.seq = seq;
    b->head.cap = BATCH_BYTES;
    b->head.taken_seq = UINT64_MAX;
    b->head.buffer = id;
    /* Items (styx_common::item): a time mark, then insn_execs of a u64 pc,
     * a u64 instruction word and a length byte, each behind its tag. */
    size_t at = 0;
    at = put(b, at, TIME_TAG, 2);
    at = put(b, at, monotonic_ns(), 8);
    for (int i = 0; i < events; i++) {
        at = put(b, at, INSN_EXEC_TAG, 2);
        at = put(b, at, first_pc + (uint64_t)i, 8);
        at = put(b, at, 0xea, 8);
        at = put(b, at, 0, 1);
    }
    b->head.len = (uint32_t)at;
    b->head.counts[0] = 1;
    b->head.counts[INSN_EXEC] = (uint32_t)events;
}

static void hand_over(struct buffer *b) {
    fire_flush((uint64_t)(uintptr_t)b, 0, b->head.len, b->head.seq, b->head.tid);
}

int main(void) {
    char line[256];
    uint64_t pc = 0x100000; /* every forged event has a pc of its own */
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        int a = 0, b = 0;
        if (sscanf(line, "backwards %d %d", &a, &b) == 2) {
            for (int seq = a - 1; seq >= 0; seq--) {
                fill(&buffers[0], 1, my_tid(), (uint64_t)seq, pc, b);
                pc += (uint64_t)b;
                hand_over(&buffers[0]);
            }
            printf("forged events=%d\n", a * b);
        } else if (sscanf(line, "conflict %d", &a) == 1) {
            for (int i = 0; i < 2; i++) {
                fill(&buffers[0], 1, my_tid(), 5, pc, a);
                pc += (uint64_t)a;
                hand_over(&buffers[0]);
            }
            printf("forged events=%d\n", 2 * a);
        } else if (sscanf(line, "repeat %d", &a) == 1) {
            fill(&buffers[0], 1, my_tid(), 7, pc, a);
            pc += (uint64_t)a;
            hand_over(&buffers[0]);
            hand_over(&buffers[0]);
            printf("forged events=%d\n", a);
        } else if (sscanf(line, "reused-tid %d", &a) == 1) {
            fill(&buffers[0], 1, my_tid(), 9, pc, a);
            pc += (uint64_t)a;
            hand_over(&buffers[0]);
            fill(&buffers[1], 2, my_tid(), 2, pc, a);
            pc += (uint64_t)a;
            hand_over(&buffers[1]);
            printf("forged events=%d\n", 2 * a);
        } else if (sscanf(line, "tids %d %d", &a, &b) == 2) {
            for (int i = 0; i < a; i++) {
                fill(&buffers[0], 1, 0x40000000u + (uint32_t)(b + i), 0, pc++, 1);
                hand_over(&buffers[0]);
            }
            printf("forged events=%d\n", a);
        } else if (sscanf(line, "registry %d", &a) == 1) {
            static unsigned char garbage[sizeof(struct head)];
            memset(garbage, 0xab, sizeof garbage);
            fill(&buffers[1], 2, my_tid(), 3, pc, a);
            pc += (uint64_t)a;
            fill(&buffers[2], 3, my_tid(), 4, pc, a);
            pc += (uint64_t)a;
            registry_slots[0] = (struct buffer *)garbage;
            registry_slots[1] = (struct buffer *)(uintptr_t)0x1000; /* unmapped */
            registry_slots[2] = &buffers[1];
            registry_slots[3] = &buffers[1]; /* listed twice */
            registry_slots[4] = NULL;        /* a gap */
            registry_slots[5] = &buffers[2];
            printf("registered events=%d\n", 2 * a);
        } else if (strncmp(line, "quit", 4) == 0) {
            return 0;
        } else {
            fprintf(stderr, "unknown command %s", line);
            return 2;
        }
    }
    return 0;
}
