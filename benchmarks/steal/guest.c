/*
 * A freestanding multiboot guest for the steal-time benchmark.
 *
 * It turns on KVM's paravirtual steal-time accounting (MSR_KVM_STEAL_TIME:
 * the host adds the time this vCPU was runnable but not running), calibrates
 * the TSC against the PIT, then runs a CPU-bound loop and prints, every
 * second of wall time, the loop iterations done and the steal time accrued:
 *   "tick <n> iters <k> steal_us <s> wall_us <w>"
 * After SECONDS ticks it prints "done" and halts. Serial port COM1.
 */
#define COM1 0x3f8
#define MSR_KVM_STEAL_TIME 0x4b564d03
#define KVM_FEATURE_STEAL_TIME (1u << 5)
#ifndef SECONDS  /* gcc -DSECONDS=N for a longer run */
#define SECONDS 20
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

__attribute__((section(".multiboot"), used, aligned(4)))
static const u32 multiboot_header[3] = {0x1BADB002, 0, -(0x1BADB002)};

struct steal_time {
    volatile u64 steal;
    volatile u32 version;
    volatile u32 flags;
    volatile unsigned char preempted;
    unsigned char pad[47];
} __attribute__((aligned(64)));

static struct steal_time st;
static unsigned char stack[16384] __attribute__((aligned(16)));

static inline void outb(unsigned short p, unsigned char v)
{ __asm__ volatile("outb %0,%1" : : "a"(v), "Nd"(p)); }
static inline unsigned char inb(unsigned short p)
{ unsigned char v; __asm__ volatile("inb %1,%0" : "=a"(v) : "Nd"(p)); return v; }
static inline u64 rdtsc(void)
{ u32 lo, hi; __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)); return ((u64)hi << 32) | lo; }
static inline void wrmsr(u32 msr, u64 v)
{ __asm__ volatile("wrmsr" : : "c"(msr), "a"((u32)v), "d"((u32)(v >> 32))); }
static inline void cpuid(u32 leaf, u32 *a, u32 *b, u32 *c, u32 *d)
{ __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0)); }

/* 64-by-32 division without libgcc (a 32-bit freestanding build). */
static u64 div32(u64 n, u32 d, u32 *rem)
{
    u32 hi = (u32)(n >> 32), lo = (u32)n, qhi = hi / d, r = hi % d, qlo;
    __asm__("divl %4" : "=a"(qlo), "=d"(r) : "a"(lo), "d"(r), "rm"(d));
    if (rem) *rem = r;
    return ((u64)qhi << 32) | qlo;
}

static void putc(char c) { while (!(inb(COM1 + 5) & 0x20)) ; outb(COM1, c); }
static void puts(const char *s) { while (*s) putc(*s++); }
static void putu(u64 v)
{
    char b[24]; int i = 0; u32 r;
    do { v = div32(v, 10, &r); b[i++] = '0' + (char)r; } while (v);
    while (i) putc(b[--i]);
}

static u64 steal_ns(void)
{
    u32 v; u64 s;
    do { v = st.version; __asm__ volatile("" ::: "memory"); s = st.steal;
         __asm__ volatile("" ::: "memory"); } while ((v & 1) || v != st.version);
    return s;
}

/* TSC ticks in 50 ms, counted by the PIT (channel 2, one-shot). */
static u64 tsc_per_50ms(void)
{
    u64 t0, t1;
    outb(0x61, (inb(0x61) & ~0x02) | 0x01);
    outb(0x43, 0xB0);
    outb(0x42, 59659 & 0xff);
    outb(0x42, 59659 >> 8);
    t0 = rdtsc();
    while (!(inb(0x61) & 0x20)) ;
    t1 = rdtsc();
    return t1 - t0;
}

__attribute__((used, noinline)) void guest_main(void)
{
    u32 a, b, c, d, tick;
    u64 per_s, start, next, s0, x = 1, iters = 0;

    outb(COM1 + 1, 0); outb(COM1 + 3, 0x80); outb(COM1, 1); outb(COM1 + 1, 0);
    outb(COM1 + 3, 0x03); outb(COM1 + 2, 0xC7);
    puts("steal-guest up\n");
    cpuid(0x40000000, &a, &b, &c, &d);
    if (b != 0x4b4d564b) { puts("error not-kvm\n"); return; }
    cpuid(0x40000001, &a, &b, &c, &d);
    if (!(a & KVM_FEATURE_STEAL_TIME)) { puts("error no-steal-time\n"); return; }
    wrmsr(MSR_KVM_STEAL_TIME, (u64)(unsigned long)&st | 1);
    per_s = tsc_per_50ms() * 20;
    puts("tsc_hz "); putu(per_s); puts("\n");
    start = rdtsc(); next = start + per_s; s0 = steal_ns();
    for (tick = 1; tick <= SECONDS; ) {
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        iters += 100000;
        u64 now = rdtsc();
        if (now >= next) {
            u64 s1 = steal_ns();
            puts("tick "); putu(tick); puts(" iters "); putu(iters);
            puts(" steal_us "); putu(div32(s1 - s0, 1000, 0));
            puts(" wall_us ");
            putu(div32((now - (next - per_s)) * 1000000, (u32)per_s, 0));
            puts(" x "); putu(x & 0xff); puts("\n");
            iters = 0; s0 = s1; next += per_s; tick++;
        }
    }
    puts("done\n");
}

__attribute__((naked, noreturn)) void _start(void)
{
    __asm__ volatile(
        "mov %0, %%esp\n"
        "call guest_main\n"
        "1: cli\n hlt\n jmp 1b\n" : : "r"(stack + sizeof(stack)));
}
