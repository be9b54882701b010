/* Minimal startup for the core's tests on QEMU mps2-an500 (Cortex-M7):
 * vector table, FPU enable, .data/.bss set-up, newlib semihosting (rdimon)
 * initialisation, C++ constructors, then exit(main()). Faults print a line
 * and exit QEMU with a failure code through semihosting. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern uint32_t __data_load__, __data_start__, __data_end__;
extern uint32_t __bss_start__, __bss_end__, __stack_top__;
extern void __libc_init_array(void);
extern void initialise_monitor_handles(void);
extern int main(void);

void Reset_Handler(void);
void Fault_Handler(void);

/* -nostartfiles drops crti/crtn; __libc_init_array still calls _init. */
void _init(void) {}
void _fini(void) {}
/* Normally from crtbegin.o: the DSO handle used by __cxa_atexit. */
void *__dso_handle = 0;

#define SCB_CPUID (*(volatile uint32_t *)0xE000ED00u)
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)

__attribute__((section(".vectors"), used))
void (*const g_vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&__stack_top__,
    Reset_Handler,
    Fault_Handler, /* NMI */
    Fault_Handler, /* HardFault */
    Fault_Handler, /* MemManage */
    Fault_Handler, /* BusFault */
    Fault_Handler, /* UsageFault */
    0, 0, 0, 0,
    Fault_Handler, /* SVCall */
    Fault_Handler, /* DebugMonitor */
    0,
    Fault_Handler, /* PendSV */
    Fault_Handler, /* SysTick */
};

static void SemihostWrite0(const char *s) {
  register uint32_t r0 __asm__("r0") = 0x04; /* SYS_WRITE0 */
  register const char *r1 __asm__("r1") = s;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
}

static void SemihostExitFailure(void) {
  register uint32_t r0 __asm__("r0") = 0x18;    /* SYS_EXIT */
  register uint32_t r1 __asm__("r1") = 0x20023; /* ADP_Stopped_RunTimeErrorUnknown */
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  for (;;) {
  }
}

void Fault_Handler(void) {
  SemihostWrite0("HardFault (or other fault exception)\n");
  SemihostExitFailure();
}

void Reset_Handler(void) {
  SCB_CPACR |= 0xFu << 20; /* CP10/CP11 full access: enable the FPU */
  __asm__ volatile("dsb\n\tisb" ::: "memory");
  uint32_t *src = &__data_load__;
  uint32_t *dst = &__data_start__;
  if (src != dst) {
    while (dst < &__data_end__) *dst++ = *src++;
  }
  for (dst = &__bss_start__; dst < &__bss_end__;) *dst++ = 0;
  initialise_monitor_handles();
  __libc_init_array();
  printf("target: CPUID=0x%08lx (Cortex-M7 part 0xC27: %s)\n", (unsigned long)SCB_CPUID,
         ((SCB_CPUID >> 4) & 0xFFFu) == 0xC27u ? "yes" : "no");
  exit(main());
}
