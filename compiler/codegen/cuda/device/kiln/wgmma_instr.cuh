// The wgmma.mma_async instructions (sm_90a) as inline-PTX wrappers, one
// struct per shape and operand form, defined where a kernel uses it by one
// macro line the code generator prints (tile_ops.cc, WgmmaInstr):
//   KILN_WGMMA_SS(NAME, N, R, K, T, IMMS)  A from a shared-memory descriptor
//   KILN_WGMMA_RS(NAME, N, R, K, T, IMMS)  A from four registers per lane
// for m64nNkK with f32 accumulators in R = N / 2 registers per lane, both
// operands of type T (f16, bf16, e4m3, e5m2), and IMMS the instruction's
// immediates after scale-d as a string ("1, 1, 0, 1": scale A, scale B,
// and for 16-bit types the MN-major flags of a shared A and of B).
//   NAME::mma(d, a, b, scale_d)  d = a * b + (scale_d ? d : 0)
//   NAME::mma_first(d, a, b)     d = a * b, d written only (SS form)
// The accumulator registers are operands %0 .. %R-1; A (a descriptor, or
// four registers), B's descriptor and scale-d follow.
#ifndef KILN_DEVICE_WGMMA_INSTR_CUH_
#define KILN_DEVICE_WGMMA_INSTR_CUH_

#define KILN_WG_STR_(x) #x
#define KILN_WG_STR(x) KILN_WG_STR_(x)
#define KILN_WG_CAT_(a, b) a##b
#define KILN_WG_CAT(a, b) KILN_WG_CAT_(a, b)
#define KILN_WG_APPLY(m, args) m args

// The accumulator operand list "%0, %1, ..., %R-1".
#define KILN_WG_D4 "%0, %1, %2, %3"
#define KILN_WG_D8 KILN_WG_D4 ", %4, %5, %6, %7"
#define KILN_WG_D12 KILN_WG_D8 ", %8, %9, %10, %11"
#define KILN_WG_D16 KILN_WG_D12 ", %12, %13, %14, %15"
#define KILN_WG_D20 KILN_WG_D16 ", %16, %17, %18, %19"
#define KILN_WG_D24 KILN_WG_D20 ", %20, %21, %22, %23"
#define KILN_WG_D28 KILN_WG_D24 ", %24, %25, %26, %27"
#define KILN_WG_D32 KILN_WG_D28 ", %28, %29, %30, %31"
#define KILN_WG_D36 KILN_WG_D32 ", %32, %33, %34, %35"
#define KILN_WG_D40 KILN_WG_D36 ", %36, %37, %38, %39"
#define KILN_WG_D44 KILN_WG_D40 ", %40, %41, %42, %43"
#define KILN_WG_D48 KILN_WG_D44 ", %44, %45, %46, %47"
#define KILN_WG_D52 KILN_WG_D48 ", %48, %49, %50, %51"
#define KILN_WG_D56 KILN_WG_D52 ", %52, %53, %54, %55"
#define KILN_WG_D60 KILN_WG_D56 ", %56, %57, %58, %59"
#define KILN_WG_D64 KILN_WG_D60 ", %60, %61, %62, %63"
#define KILN_WG_D68 KILN_WG_D64 ", %64, %65, %66, %67"
#define KILN_WG_D72 KILN_WG_D68 ", %68, %69, %70, %71"
#define KILN_WG_D76 KILN_WG_D72 ", %72, %73, %74, %75"
#define KILN_WG_D80 KILN_WG_D76 ", %76, %77, %78, %79"
#define KILN_WG_D84 KILN_WG_D80 ", %80, %81, %82, %83"
#define KILN_WG_D88 KILN_WG_D84 ", %84, %85, %86, %87"
#define KILN_WG_D92 KILN_WG_D88 ", %88, %89, %90, %91"
#define KILN_WG_D96 KILN_WG_D92 ", %92, %93, %94, %95"
#define KILN_WG_D100 KILN_WG_D96 ", %96, %97, %98, %99"
#define KILN_WG_D104 KILN_WG_D100 ", %100, %101, %102, %103"
#define KILN_WG_D108 KILN_WG_D104 ", %104, %105, %106, %107"
#define KILN_WG_D112 KILN_WG_D108 ", %108, %109, %110, %111"
#define KILN_WG_D116 KILN_WG_D112 ", %112, %113, %114, %115"
#define KILN_WG_D120 KILN_WG_D116 ", %116, %117, %118, %119"
#define KILN_WG_D124 KILN_WG_D120 ", %120, %121, %122, %123"
#define KILN_WG_D128 KILN_WG_D124 ", %124, %125, %126, %127"

// C(0), C(1), ..., C(R-1): the accumulator operands with their constraint.
#define KILN_WG_O4(C) C(0), C(1), C(2), C(3)
#define KILN_WG_O8(C) KILN_WG_O4(C), C(4), C(5), C(6), C(7)
#define KILN_WG_O12(C) KILN_WG_O8(C), C(8), C(9), C(10), C(11)
#define KILN_WG_O16(C) KILN_WG_O12(C), C(12), C(13), C(14), C(15)
#define KILN_WG_O20(C) KILN_WG_O16(C), C(16), C(17), C(18), C(19)
#define KILN_WG_O24(C) KILN_WG_O20(C), C(20), C(21), C(22), C(23)
#define KILN_WG_O28(C) KILN_WG_O24(C), C(24), C(25), C(26), C(27)
#define KILN_WG_O32(C) KILN_WG_O28(C), C(28), C(29), C(30), C(31)
#define KILN_WG_O36(C) KILN_WG_O32(C), C(32), C(33), C(34), C(35)
#define KILN_WG_O40(C) KILN_WG_O36(C), C(36), C(37), C(38), C(39)
#define KILN_WG_O44(C) KILN_WG_O40(C), C(40), C(41), C(42), C(43)
#define KILN_WG_O48(C) KILN_WG_O44(C), C(44), C(45), C(46), C(47)
#define KILN_WG_O52(C) KILN_WG_O48(C), C(48), C(49), C(50), C(51)
#define KILN_WG_O56(C) KILN_WG_O52(C), C(52), C(53), C(54), C(55)
#define KILN_WG_O60(C) KILN_WG_O56(C), C(56), C(57), C(58), C(59)
#define KILN_WG_O64(C) KILN_WG_O60(C), C(60), C(61), C(62), C(63)
#define KILN_WG_O68(C) KILN_WG_O64(C), C(64), C(65), C(66), C(67)
#define KILN_WG_O72(C) KILN_WG_O68(C), C(68), C(69), C(70), C(71)
#define KILN_WG_O76(C) KILN_WG_O72(C), C(72), C(73), C(74), C(75)
#define KILN_WG_O80(C) KILN_WG_O76(C), C(76), C(77), C(78), C(79)
#define KILN_WG_O84(C) KILN_WG_O80(C), C(80), C(81), C(82), C(83)
#define KILN_WG_O88(C) KILN_WG_O84(C), C(84), C(85), C(86), C(87)
#define KILN_WG_O92(C) KILN_WG_O88(C), C(88), C(89), C(90), C(91)
#define KILN_WG_O96(C) KILN_WG_O92(C), C(92), C(93), C(94), C(95)
#define KILN_WG_O100(C) KILN_WG_O96(C), C(96), C(97), C(98), C(99)
#define KILN_WG_O104(C) KILN_WG_O100(C), C(100), C(101), C(102), C(103)
#define KILN_WG_O108(C) KILN_WG_O104(C), C(104), C(105), C(106), C(107)
#define KILN_WG_O112(C) KILN_WG_O108(C), C(108), C(109), C(110), C(111)
#define KILN_WG_O116(C) KILN_WG_O112(C), C(112), C(113), C(114), C(115)
#define KILN_WG_O120(C) KILN_WG_O116(C), C(116), C(117), C(118), C(119)
#define KILN_WG_O124(C) KILN_WG_O120(C), C(120), C(121), C(122), C(123)
#define KILN_WG_O128(C) KILN_WG_O124(C), C(124), C(125), C(126), C(127)

// The operand numbers after R accumulator registers: R .. R + 5.
#define KILN_WG_IX4 4, 5, 6, 7, 8, 9
#define KILN_WG_IX8 8, 9, 10, 11, 12, 13
#define KILN_WG_IX12 12, 13, 14, 15, 16, 17
#define KILN_WG_IX16 16, 17, 18, 19, 20, 21
#define KILN_WG_IX20 20, 21, 22, 23, 24, 25
#define KILN_WG_IX24 24, 25, 26, 27, 28, 29
#define KILN_WG_IX28 28, 29, 30, 31, 32, 33
#define KILN_WG_IX32 32, 33, 34, 35, 36, 37
#define KILN_WG_IX36 36, 37, 38, 39, 40, 41
#define KILN_WG_IX40 40, 41, 42, 43, 44, 45
#define KILN_WG_IX44 44, 45, 46, 47, 48, 49
#define KILN_WG_IX48 48, 49, 50, 51, 52, 53
#define KILN_WG_IX52 52, 53, 54, 55, 56, 57
#define KILN_WG_IX56 56, 57, 58, 59, 60, 61
#define KILN_WG_IX60 60, 61, 62, 63, 64, 65
#define KILN_WG_IX64 64, 65, 66, 67, 68, 69
#define KILN_WG_IX68 68, 69, 70, 71, 72, 73
#define KILN_WG_IX72 72, 73, 74, 75, 76, 77
#define KILN_WG_IX76 76, 77, 78, 79, 80, 81
#define KILN_WG_IX80 80, 81, 82, 83, 84, 85
#define KILN_WG_IX84 84, 85, 86, 87, 88, 89
#define KILN_WG_IX88 88, 89, 90, 91, 92, 93
#define KILN_WG_IX92 92, 93, 94, 95, 96, 97
#define KILN_WG_IX96 96, 97, 98, 99, 100, 101
#define KILN_WG_IX100 100, 101, 102, 103, 104, 105
#define KILN_WG_IX104 104, 105, 106, 107, 108, 109
#define KILN_WG_IX108 108, 109, 110, 111, 112, 113
#define KILN_WG_IX112 112, 113, 114, 115, 116, 117
#define KILN_WG_IX116 116, 117, 118, 119, 120, 121
#define KILN_WG_IX120 120, 121, 122, 123, 124, 125
#define KILN_WG_IX124 124, 125, 126, 127, 128, 129
#define KILN_WG_IX128 128, 129, 130, 131, 132, 133
#define KILN_WG_I0(a, b, c, d, e, f) a
#define KILN_WG_I1(a, b, c, d, e, f) b
#define KILN_WG_I2(a, b, c, d, e, f) c
#define KILN_WG_I3(a, b, c, d, e, f) d
#define KILN_WG_I4(a, b, c, d, e, f) e
#define KILN_WG_I5(a, b, c, d, e, f) f
// "%n" for the i-th operand after R accumulator registers.
#define KILN_WG_OP(i, R)                                    \
  "%" KILN_WG_STR(KILN_WG_APPLY(KILN_WG_CAT(KILN_WG_I, i), \
                                (KILN_WG_CAT(KILN_WG_IX, R))))
#define KILN_WG_RW(i) "+f"(d[i])
#define KILN_WG_WO(i) "=f"(d[i])

// The instruction: scale-d as a predicate, then the product.
#define KILN_WG_ASM(N, R, K, T, A, B, SCALE, IMMS)                          \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE                                \
  ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k" #K ".f32." #T "." #T \
  " {" KILN_WG_CAT(KILN_WG_D, R) "}, " A ", " B ", p, " IMMS ";\n}\n"
#define KILN_WG_ASM_SS(N, R, K, T, IMMS)                                 \
  KILN_WG_ASM(N, R, K, T, KILN_WG_OP(0, R), KILN_WG_OP(1, R), \
              KILN_WG_OP(2, R), IMMS)
#define KILN_WG_ASM_RS(N, R, K, T, IMMS)                                   \
  KILN_WG_ASM(N, R, K, T,                                                  \
              "{" KILN_WG_OP(0, R) ", " KILN_WG_OP(1, R) ", " KILN_WG_OP(   \
                  2, R) ", " KILN_WG_OP(3, R) "}",                         \
              KILN_WG_OP(4, R), KILN_WG_OP(5, R), IMMS)

#define KILN_WGMMA_SS(NAME, N, R, K, T, IMMS)                               \
  struct NAME {                                                             \
    __device__ __forceinline__ static void mma(float (&d)[R],               \
                                               unsigned long long a,        \
                                               unsigned long long b,        \
                                               int scale_d) {               \
      asm volatile(KILN_WG_ASM_SS(N, R, K, T, IMMS)                          \
                   : KILN_WG_CAT(KILN_WG_O, R)(KILN_WG_RW)                  \
                   : "l"(a), "l"(b), "r"(scale_d));                         \
    }                                                                       \
    __device__ __forceinline__ static void mma_first(float (&d)[R],         \
                                                     unsigned long long a,  \
                                                     unsigned long long b) { \
      asm volatile(KILN_WG_ASM_SS(N, R, K, T, IMMS)                          \
                   : KILN_WG_CAT(KILN_WG_O, R)(KILN_WG_WO)                  \
                   : "l"(a), "l"(b), "r"(0));                               \
    }                                                                       \
  }

#define KILN_WGMMA_RS(NAME, N, R, K, T, IMMS)                               \
  struct NAME {                                                             \
    __device__ __forceinline__ static void mma(float (&d)[R],               \
                                               const unsigned* a,           \
                                               unsigned long long b,        \
                                               int scale_d) {               \
      asm volatile(KILN_WG_ASM_RS(N, R, K, T, IMMS)                          \
                   : KILN_WG_CAT(KILN_WG_O, R)(KILN_WG_RW)                  \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b),    \
                     "r"(scale_d));                                         \
    }                                                                       \
  }

#endif  // KILN_DEVICE_WGMMA_INSTR_CUH_
