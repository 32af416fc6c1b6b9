module gotour

go 1.19
