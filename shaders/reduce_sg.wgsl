// Workgroup sum and max through subgroup operations (SUBGROUP feature): one
// subgroupAdd (subgroupMax), one workgroup-memory step over the subgroups'
// partial results. Every thread of the workgroup calls them.
struct Lanes {
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) nsg: u32,
}

var<workgroup> red: array<f32, 256>;

fn reduce_sum(t: u32, v: f32, l: Lanes) -> f32 {
    let s = subgroupAdd(v);
    if l.lane == 0u {
        red[l.sg] = s;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < l.nsg; i++) {
        total += red[i];
    }
    workgroupBarrier();
    return total;
}

fn reduce_max(t: u32, v: f32, l: Lanes) -> f32 {
    let s = subgroupMax(v);
    if l.lane == 0u {
        red[l.sg] = s;
    }
    workgroupBarrier();
    var top = red[0];
    for (var i = 1u; i < l.nsg; i++) {
        top = max(top, red[i]);
    }
    workgroupBarrier();
    return top;
}
