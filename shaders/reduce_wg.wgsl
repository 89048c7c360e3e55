// Workgroup sum by a tree in workgroup memory (no SUBGROUP feature). `Lanes`
// holds no value here (a builtin the entry point does not use otherwise).
struct Lanes {
    @builtin(num_workgroups) unused: vec3<u32>,
}

var<workgroup> red: array<f32, 256>;

fn reduce_sum(t: u32, v: f32, l: Lanes) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
        if t < h {
            red[t] += red[t + h];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}
