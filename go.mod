module strata

go 1.26
