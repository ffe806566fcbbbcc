package testcluster

import "testing"

// LockSubnet holds 127.0.<subnet>.x for t until it ends, for tests that put
// processes of their own on a subnet (see lockSubnet).
func LockSubnet(t testing.TB, subnet int) { lockSubnet(t, subnet) }
