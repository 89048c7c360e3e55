// The workgroup sum of every thread's NR sums for each of ROWS input rows,
// for the kernels whose workgroup computes NR weight rows for several input
// rows (shaders/mm.wgsl, shaders/matvec_q8_cols.wgsl): a tree over SUM_WG
// threads in workgroup memory. Every thread calls it with its own sums and
// gets the totals. The includer defines ROWS and SUM_WG (its workgroup size,
// a power of two).
var<workgroup> part: array<array<vec4<f32>, ROWS>, SUM_WG>;

fn sum_rows(t: u32, acc: array<vec4<f32>, ROWS>) -> array<vec4<f32>, ROWS> {
    part[t] = acc;
    workgroupBarrier();
    for (var s = SUM_WG / 2u; s > 0u; s >>= 1u) {
        if t < s {
            for (var r = 0u; r < ROWS; r++) {
                part[t][r] += part[t + s][r];
            }
        }
        workgroupBarrier();
    }
    return part[0];
}
