// hw_emu_fiber_switch (fiber_switch.hpp): push the callee-saved registers, store the stack
// pointer in *save_sp (rdi), load load_sp (rsi), pop that fiber's registers and return into it.
#if defined(__x86_64__)
asm(R"(
    .text
    .globl hw_emu_fiber_switch
    .type hw_emu_fiber_switch, @function
hw_emu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size hw_emu_fiber_switch, .-hw_emu_fiber_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif
