// RoPE pairing shared by rope.wgsl and rope_append.wgsl (which bind the cos /
// sin tables as `cs` / `sn`). Parameters: a.w = d, b.y = rotated dims,
// b.z = style (0 neox, 1 normal), b.w = first table row.
// Where element i of an [S, heads, d] tensor takes its rotation from:
// (first partner, second partner, table index, whether i is the first of
// its pair, whether it is rotated at all).
struct Pair {
    i1: u32,
    i2: u32,
    t: u32,
    first: bool,
    rotated: bool,
}

fn pair_of(i: u32, heads: u32) -> Pair {
    let d = p.a.w;
    let rot = p.b.y;
    let half = rot / 2u;
    let j = i % d;
    let row = i - j;
    let s = i / (heads * d);
    var pr = Pair(i, i, 0u, true, j < rot);
    if !pr.rotated {
        return pr;
    }
    var pair: u32;
    if p.b.z == 0u {
        pr.first = j < half;
        pair = select(j - half, j, pr.first);
        pr.i1 = row + pair;
        pr.i2 = row + pair + half;
    } else {
        pr.first = (j & 1u) == 0u;
        pair = j / 2u;
        pr.i1 = row + 2u * pair;
        pr.i2 = pr.i1 + 1u;
    }
    pr.t = (p.b.w + s) * half + pair;
    return pr;
}

fn turn(pr: Pair, x1: f32, x2: f32) -> f32 {
    let c = cs[pr.t];
    let sv = sn[pr.t];
    return select(x1 * sv + x2 * c, x1 * c - x2 * sv, pr.first);
}
