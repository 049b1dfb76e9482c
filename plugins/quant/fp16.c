/* fp16.c — the public fp16/bf16 conversions (quant.h); the arithmetic is in half.h. */
#include "plugins/quant/half.h"
#include "plugins/quant/quant.h"

float memra_fp16_to_f32(uint16_t h) { return memra_half_to_f32(h); }
uint16_t memra_f32_to_fp16(float f) { return memra_f32_to_half(f); }
float memra_bf16_to_f32(uint16_t h) { return memra_bf16_bits_to_f32(h); }
uint16_t memra_f32_to_bf16(float f) { return memra_f32_to_bf16_bits(f); }
