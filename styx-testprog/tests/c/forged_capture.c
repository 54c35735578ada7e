/* A hostile target for what keeps batches whole (raw captures, the flight
 * recorder): it hands over batches through a flush site of its own, written
 * by hand as styx-probe writes its own (provider styx_batch, probe flush,
 * arguments head, start, len, seq, tid in rdi, rsi, rdx, rcx, r8; the
 * semaphore a FlushSemaphore of this loader's layout version, -DLAYOUT_VERSION,
 * whose registry lists no buffer), so it can say anything in a batch's head
 * and items.
 * Layout: styx-common/src/batch.rs.
 *
 * Commands on stdin, each answered "ok":
 *   good TID SEQ N   a batch of a time mark and N insn_exec (pc 0x1000+i,
 *                    insn SEQ), counts right, as thread TID
 *   forged TID SEQ   a time mark then an item of tag 0xffff: its head's
 *                    counts (a mark, an insn_exec) add up to its 29 bytes
 *   tids FIRST COUNT N  COUNT good batches of N events, thread ids FIRST,
 *                    FIRST+1, ...: threads that come and go, or made up
 *   quit */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BATCH_BYTES 16384
#define KIND_TIME 0
#define KIND_INSN_EXEC 2

#if !defined(INSN_EXEC_TAG) || !defined(TIME_TAG) || !defined(LAYOUT_VERSION)
#error "build with the item tags and layout version from styx_common (see the e2e test)"
#endif

struct head {
    uint32_t magic, tid;
    uint64_t seq;
    uint32_t len, cap;
    uint64_t taken_seq;
    uint32_t taken_len, reserved;
    uint32_t counts[16];
};
_Static_assert(sizeof(struct head) == 104, "BatchHead is 104 bytes");

struct flush_semaphore {
    uint16_t listeners, layout_version;
    uint32_t reserved;
    void *const *registry;
    uint64_t flushed, credit;
    uint32_t credit_owner, reserved2;
};
_Static_assert(sizeof(struct flush_semaphore) == 40, "FlushSemaphore is 40 bytes");

static void *const registry[1024];
struct flush_semaphore forged_flush_semaphore
    __attribute__((used, aligned(8), section(".probes"))) = {.layout_version = LAYOUT_VERSION,
                                                             .registry = registry};
/* The batch-enable site of insn_exec raises the high half of this word. */
uint32_t forged_insn_exec_semaphore __attribute__((used, aligned(4), section(".probes"))) = 0;

static struct {
    struct head head;
    uint8_t items[BATCH_BYTES];
} buffer __attribute__((aligned(8)));

#define NOTE(provider, probe, sema, spec)                                             \
    ".pushsection .note.stapsdt, \"\", \"note\"\n.balign 4\n"                         \
    ".4byte 992f-991f, 994f-993f, 3\n991: .asciz \"stapsdt\"\n992: .balign 4\n"       \
    "993: .8byte 990b\n.8byte _.stapsdt.base\n.8byte " sema "\n"                      \
    ".asciz \"" provider "\"\n.asciz \"" probe "\"\n.asciz \"" spec "\"\n"            \
    "994: .balign 4\n.popsection\n"

__asm__(".pushsection .stapsdt.base, \"aGR\", \"progbits\", .stapsdt.base, comdat\n"
        ".weak _.stapsdt.base\n.hidden _.stapsdt.base\n_.stapsdt.base:\n.space 1\n"
        ".size _.stapsdt.base, 1\n.popsection\n");

__attribute__((noinline)) static void fire_flush(uint64_t start, uint64_t len, uint64_t seq,
                                                 uint64_t tid) {
    register uint64_t r8 __asm__("r8") = tid;
    __asm__ volatile("990: nop\n" NOTE("styx_batch", "flush", "forged_flush_semaphore",
                                       "8@%%rdi 8@%%rsi 8@%%rdx 8@%%rcx 8@%%r8")
                     /* Never run: there to be attached to. */
                     "jmp 995f\n990: nop\n"
                     NOTE("styx_batch", "insn_exec", "forged_insn_exec_semaphore+2", "")
                     "995:\n"
                     :
                     : "D"(&buffer), "S"(start), "d"(len), "c"(seq), "r"(r8)
                     : "memory");
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Writes the low `bytes` bytes of `value` at item offset `at` (items:
 * styx-common/src/item.rs); the offset after them. */
static size_t put(size_t at, uint64_t value, size_t bytes) {
    memcpy(&buffer.items[at], &value, bytes);
    return at + bytes;
}

/* An insn_exec item: a u64 pc and instruction word, no length. */
static size_t insn(size_t at, uint16_t tag, uint64_t pc, uint64_t word) {
    at = put(at, tag, 2);
    at = put(at, pc, 8);
    at = put(at, word, 8);
    return put(at, 0, 1);
}

/* Starts a batch of thread `tid`: its head, and a time mark. */
static size_t begin(uint32_t tid, uint64_t seq) {
    memset(&buffer.head, 0, sizeof buffer.head);
    buffer.head.magic = 0x78797473; /* "styx" */
    buffer.head.tid = tid;
    buffer.head.seq = seq;
    buffer.head.cap = BATCH_BYTES;
    buffer.head.counts[KIND_TIME] = 1;
    return put(put(0, TIME_TAG, 2), now_ns(), 8);
}

static void hand_over(size_t bytes) {
    buffer.head.len = (uint32_t)bytes;
    fire_flush(0, buffer.head.len, buffer.head.seq, buffer.head.tid);
}

static void good(uint32_t tid, uint64_t seq, unsigned n) {
    size_t at = begin(tid, seq);
    for (unsigned i = 0; i < n && at + 19 <= BATCH_BYTES; i++) {
        at = insn(at, INSN_EXEC_TAG, 0x1000 + i, seq);
        buffer.head.counts[KIND_INSN_EXEC]++;
    }
    hand_over(at);
}

int main(void) {
    char line[128];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        unsigned tid, count, n;
        unsigned long long seq;
        if (sscanf(line, "good %u %llu %u", &tid, &seq, &n) == 3) {
            good(tid, seq, n);
        } else if (sscanf(line, "forged %u %llu", &tid, &seq) == 2) {
            size_t at = begin(tid, seq);
            at = insn(at, 0xffff, 0x1000, seq);
            buffer.head.counts[KIND_INSN_EXEC] = 1;
            hand_over(at);
        } else if (sscanf(line, "tids %u %u %u", &tid, &count, &n) == 3) {
            for (unsigned k = 0; k < count; k++)
                good(tid + k, 0, n);
        } else if (strncmp(line, "quit", 4) == 0) {
            return 0;
        } else {
            fprintf(stderr, "unknown command %s", line);
            return 2;
        }
        puts("ok");
    }
    return 0;
}
