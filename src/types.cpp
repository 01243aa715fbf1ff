// placeholder: implemented by the host module work
