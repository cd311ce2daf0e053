package tensor

// EachImpl runs f once with each available kernel set active (the generic
// one first), for the tests of package tensor_test.
var EachImpl = eachImpl
