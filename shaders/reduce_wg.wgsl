// Workgroup sum and max by a tree in workgroup memory (no SUBGROUP feature),
// for workgroups of up to 256 threads. `Lanes` holds no value here (a builtin
// the entry point does not use otherwise). Every thread calls them.
struct Lanes {
    @builtin(num_workgroups) unused: vec3<u32>,
}

var<workgroup> red: array<f32, 256>;

fn reduce_sum(t: u32, v: f32, l: Lanes) -> f32 {
    return reduce_tree(t, v, false);
}

fn reduce_max(t: u32, v: f32, l: Lanes) -> f32 {
    return reduce_tree(t, v, true);
}

fn reduce_tree(t: u32, v: f32, is_max: bool) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
        if t < h {
            red[t] = select(red[t] + red[t + h], max(red[t], red[t + h]), is_max);
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}
